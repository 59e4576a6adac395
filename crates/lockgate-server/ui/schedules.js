// Schedules (next planned times, history with outcomes and skip reasons), backups (phase
// and block progress) and restores (phase and item counts).

import { get } from "./api.js";
import { h, put, pill, when, rel, jobLink, card } from "./dom.js";

function runRow(r) {
  const outcome = r.skipped ? pill("cancelled", "skipped") : r.state ? pill(r.state) : h("span", { class: "muted" }, "–");
  return h("tr", {},
    h("td", { title: r.planned }, when(r.planned)),
    h("td", {}, r.job ? jobLink(r.job) : h("span", { class: "muted" }, "no job")),
    h("td", {}, outcome),
    h("td", { class: "wrap" }, r.note || ""));
}

export function render(root) {
  const error = h("div", { role: "alert" });
  const list = h("div", { class: "stack" });
  const open = new Set();
  put(root, h("h1", {}, "Schedules"), error, list);

  async function history(name, box) {
    try {
      const s = await get(`/v1/schedules/${encodeURIComponent(name)}?limit=20`);
      put(box, s.history.length
        ? h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ["planned", "job", "outcome", "note"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, s.history.map(runRow))))
        : h("p", { class: "muted" }, "No runs yet."));
    } catch (e) {
      put(box, h("p", { class: "error" }, e.message));
    }
  }

  async function refresh() {
    try {
      const { schedules } = await get("/v1/schedules");
      put(error);
      put(list, schedules.length ? schedules.map((s) => {
        const box = h("div", {});
        const toggle = h("button", { type: "button", "aria-expanded": open.has(s.name) ? "true" : "false", "aria-controls": `hist-${s.name}` }, open.has(s.name) ? "Hide history" : "Show history");
        toggle.addEventListener("click", () => {
          if (open.has(s.name)) open.delete(s.name); else open.add(s.name);
          refresh();
        });
        if (open.has(s.name)) history(s.name, box);
        return h("section", { class: "card", "data-testid": "schedule-card", "data-schedule": s.name },
          h("div", { class: "row" }, h("h2", { class: "mono", style: { margin: 0 } }, s.name), h("code", {}, s.when),
            h("span", { class: "muted small" }, `${s.source} · ${s.zone} · duplicates ${s.duplicates}`), h("span", { class: "spacer" }), toggle),
          h("p", {}, h("strong", {}, "Next: "), s.next ? [h("time", { datetime: s.next, title: s.next }, when(s.next)), ` (${rel(s.next)})`] : h("span", { class: "muted" }, "none planned"),
            s.last_run ? [" · last: ", when(s.last_run.planned), " ", s.last_run.skipped ? pill("cancelled", "skipped") : s.last_run.state ? pill(s.last_run.state) : "", s.last_run.note ? ` ${s.last_run.note}` : ""] : null),
          s.error ? h("p", { class: "error" }, `Suspended: ${s.error}`) : null,
          h("div", { id: `hist-${s.name}` }, box));
      }) : h("p", { class: "muted" }, "No schedules. Define them in the policy ([[schedule]]) or with lockgate schedule add."));
    } catch (e) {
      put(error, h("div", { class: "errbox" }, e.message));
    }
  }
  refresh();
  return { refresh, refreshMs: 3000 };
}

function progress(done, total) {
  const pct = total ? Math.round((100 * done) / total) : 0;
  return h("div", { class: "row" },
    h("div", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done, "aria-label": `${done} of ${total} blocks` },
      h("span", { style: { width: `${pct}%` } })),
    h("span", { class: "small" }, `${done}/${total}`));
}

/** A phase pill with the reasons under it, or a dash. */
function phaseCell(v) {
  return h("td", { class: "wrap" }, v.phase ? pill(v.phase) : h("span", { class: "muted" }, "–"),
    v.reasons && v.reasons.length ? h("div", { class: "small muted" }, v.reasons.join("; ")) : null);
}

function table(columns, tbody) {
  return h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))), tbody));
}

export function renderBackups(root) {
  const error = h("div", { role: "alert" });
  const tbody = h("tbody");
  const restoreRows = h("tbody");
  put(root, h("h1", {}, "Backups"), error,
    card(null, "", table(["name", "state", "phase", "blocks", "items", "job", "created", "by"], tbody)),
    card("Restores", "", h("p", { class: "small muted" }, "Restores rank ahead of backups: each takes the next slot that frees."),
      table(["name", "backup", "state", "phase", "restored", "skipped", "failed", "job", "created", "by"], restoreRows)));

  async function refresh() {
    try {
      const [{ backups }, { restores }] = await Promise.all([get("/v1/backups"), get("/v1/restores")]);
      put(error);
      put(restoreRows, restores.length ? restores.slice().reverse().map((r) => h("tr", { "data-testid": "restore-row", "data-restore": r.name },
        h("td", { class: "mono" }, r.name),
        h("td", { class: "mono" }, r.backup),
        h("td", {}, pill(r.state)),
        phaseCell(r),
        h("td", {}, String(r.items.restored)),
        h("td", {}, String(r.items.skipped)),
        h("td", {}, String(r.items.failed)),
        h("td", {}, r.job ? jobLink(r.job) : "–"),
        h("td", { title: r.created_at }, when(r.created_at)),
        h("td", {}, r.created_by))) : h("tr", {}, h("td", { colspan: 10, class: "muted" }, "No restores yet.")));
      put(tbody, backups.length ? backups.slice().reverse().map((b) => h("tr", { "data-testid": "backup-row", "data-backup": b.name },
        h("td", { class: "mono" }, b.name),
        h("td", {}, pill(b.state)),
        phaseCell(b),
        h("td", {}, progress(b.progress.blocks_done, b.progress.blocks_total)),
        h("td", {}, `${b.progress.items_done}/${b.progress.items_total}`),
        h("td", {}, b.job ? jobLink(b.job) : "–"),
        h("td", { title: b.created_at }, when(b.created_at)),
        h("td", {}, b.created_by))) : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No backups yet.")));
    } catch (e) {
      put(error, h("div", { class: "errbox" }, e.message));
    }
  }
  refresh();
  return { refresh, refreshMs: 1500 };
}
