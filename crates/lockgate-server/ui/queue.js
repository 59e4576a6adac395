// Queue: every job not yet ended (or the jobs of one state), filtered on the server
// (state, kind, owner, node, attribute selector), sorted and paged in the browser, so
// 1,000 jobs show PAGE rows at a time and sorting sees all of them.

import { get } from "./api.js";
import { h, put, pill, dur, between, when, jobLink } from "./dom.js";

const PAGE = 50;
const MAX_ROWS = 5000;
const STATES = ["active", "queued", "preparing", "prepared", "running", "succeeded", "failed", "cancelled", "lost", "expired"];
const COLUMNS = [
  ["id", "Job", (j) => j.id],
  ["state", "State", (j) => j.state],
  ["kind", "Kind", (j) => j.kind],
  ["owner", "Owner", (j) => j.owner],
  ["node", "Node", (j) => j.node || ""],
  ["priority", "Priority", (j) => j.priority],
  ["submitted", "Submitted", (j) => j.submitted_at],
  ["waited", "Waiting / running", (j) => age(j)],
];

/** Seconds in the current state's phase: waiting since queued, or running since admitted. */
function age(j) {
  if (j.finished_at) return between(j.started_at || j.submitted_at, j.finished_at) || 0;
  if (j.state === "queued") return between(j.queued_at || j.submitted_at) || 0;
  return between(j.prepare_started_at || j.started_at) || 0;
}

/** Columns left out on narrow screens (the job page has them all). */
const HIDDEN = { priority: "hide-narrow", submitted: "hide-narrow", node: "hide-narrow", owner: "hide-phone" };

const state = { filters: { state: "active", kind: "", owner: "", node: "", attr: "" }, sort: "id", dir: 1, page: 0 };

function query() {
  const f = state.filters;
  const q = new URLSearchParams({ limit: "1000" });
  if (f.state === "active") q.set("active", "true");
  else if (f.state) { q.set("state", f.state); q.set("order", "desc"); }
  for (const k of ["kind", "owner", "node", "attr"]) if (f[k].trim()) q.set(k, f[k].trim());
  return q;
}

async function fetchAll() {
  const q = query();
  const desc = q.get("order") === "desc";
  let rows = [];
  for (;;) {
    const page = await get(`/v1/jobs?${q}`);
    rows = rows.concat(page.jobs);
    if (page.next === null || page.next === undefined || rows.length >= MAX_ROWS) return { rows, more: page.next !== null && page.next !== undefined };
    q.set(desc ? "before" : "after", String(page.next));
  }
}

export function render(root) {
  const error = h("div", { role: "alert" });
  const summary = h("p", { class: "muted", "aria-live": "polite" });
  const thead = h("thead");
  const tbody = h("tbody");
  const pos = h("span", { class: "muted" });
  const prev = h("button", { type: "button", "data-testid": "page-prev", onclick: () => { state.page--; draw(); } }, "← Previous");
  const next = h("button", { type: "button", "data-testid": "page-next", onclick: () => { state.page++; draw(); } }, "Next →");
  let rows = [];
  let more = false;

  const input = (key, label, placeholder) => {
    const el = h("input", { id: `f-${key}`, "data-testid": `filter-${key}`, value: state.filters[key], placeholder, autocomplete: "off", spellcheck: "false" });
    el.addEventListener("change", () => { state.filters[key] = el.value; state.page = 0; load(); });
    return h("div", { class: "stack" }, h("label", { for: `f-${key}` }, label), el);
  };
  const select = h("select", { id: "f-state", "data-testid": "filter-state" },
    STATES.map((s) => h("option", { value: s, selected: s === state.filters.state }, s === "active" ? "not ended" : s)));
  select.addEventListener("change", () => { state.filters.state = select.value; state.page = 0; load(); });

  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); load(); } },
    h("div", { class: "stack" }, h("label", { for: "f-state" }, "State"), select),
    input("kind", "Kind", "restic"),
    input("owner", "Owner", "ci"),
    input("node", "Node", "node-1"),
    input("attr", "Attribute", "repo=r1"),
    h("div", { class: "stack" }, h("span", { class: "small" }, " "), h("button", { type: "submit", class: "primary" }, "Apply filters")));

  put(root, h("h1", {}, "Queue"),
    h("section", { class: "card" }, form, error, summary,
      h("div", { class: "table-wrap" }, h("table", { "data-testid": "queue-table" }, thead, tbody)),
      h("div", { class: "pager" }, pos, prev, next)));

  function header() {
    put(thead, h("tr", {}, COLUMNS.map(([key, label]) => {
      const sort = state.sort === key ? (state.dir > 0 ? "ascending" : "descending") : null;
      return h("th", { scope: "col", "aria-sort": sort || "none", class: HIDDEN[key] || null },
        h("button", { type: "button", "data-sort": key, "aria-sort": sort,
          onclick: () => { if (state.sort === key) state.dir = -state.dir; else { state.sort = key; state.dir = 1; } state.page = 0; draw(); } }, label));
    })));
  }

  function draw() {
    header();
    const col = COLUMNS.find((c) => c[0] === state.sort) || COLUMNS[0];
    const key = col[2];
    const sorted = rows.slice().sort((a, b) => {
      const x = key(a), y = key(b);
      return (x < y ? -1 : x > y ? 1 : a.id - b.id) * state.dir;
    });
    const pages = Math.max(1, Math.ceil(sorted.length / PAGE));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    const shown = sorted.slice(state.page * PAGE, (state.page + 1) * PAGE);
    put(tbody, shown.length ? shown.map((j) => h("tr", { "data-testid": "queue-row", "data-job": j.id, "data-state": j.state },
      h("td", {}, jobLink(j.id)),
      h("td", {}, pill(j.state)),
      h("td", { class: "mono" }, j.kind),
      h("td", { class: HIDDEN.owner }, j.owner),
      h("td", { class: HIDDEN.node }, j.node || h("span", { class: "muted" }, j.node_selector ? `any of ${j.node_selector}` : "–")),
      h("td", { class: "hide-narrow" }, j.priority),
      h("td", { class: "hide-narrow", title: j.submitted_at }, when(j.submitted_at)),
      h("td", {}, dur(age(j))))) : h("tr", {}, h("td", { colspan: COLUMNS.length, class: "muted" }, "No jobs match.")));
    put(pos, `Page ${state.page + 1} of ${pages}`);
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    put(summary, `${rows.length}${more ? "+" : ""} jobs${more ? ` (the first ${rows.length} shown)` : ""}`);
  }

  async function load() {
    try {
      ({ rows, more } = await fetchAll());
      put(error);
    } catch (e) {
      put(error, h("div", { class: "errbox" }, `${e.field ? `${e.field}: ` : ""}${e.message}`));
      rows = [];
    }
    draw();
  }

  load();
  return { refresh: load, refreshMs: 2000 };
}
