// The dashboard's entry: the session, the hash router, and the live event stream.
//
// Each view module exports `render(root, params)` and returns `{refresh, onEvent}`
// (both optional). Any committed event marks the view stale; it refreshes at most every
// REFRESH_MS (or the view's own `refreshMs`), so a burst of events costs one reload of
// what the page shows.

import { loadSession, session, get, events } from "./api.js";
import { h, put } from "./dom.js";
import * as overview from "./overview.js";
import * as queue from "./queue.js";
import * as job from "./job.js";
import * as nodes from "./nodes.js";
import * as policy from "./policy.js";
import * as schedules from "./schedules.js";

const REFRESH_MS = 700;
const KEEP_EVENTS = 200;

const routes = [
  [/^#\/overview$/, overview.render, "overview"],
  [/^#\/queue$/, queue.render, "queue"],
  [/^#\/jobs\/(\d+)$/, job.render, "queue"],
  [/^#\/nodes$/, nodes.render, "nodes"],
  [/^#\/policy$/, policy.render, "policy"],
  [/^#\/schedules$/, schedules.render, "schedules"],
  [/^#\/backups$/, schedules.renderBackups, "backups"],
];

let current = null;
let stale = false;
let timer = null;

function navigate() {
  const hash = location.hash || "#/overview";
  const root = document.getElementById("view");
  for (const a of document.querySelectorAll(".nav a")) a.removeAttribute("aria-current");
  for (const [re, render, nav] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    document.querySelector(`[data-testid="nav-${nav}"]`)?.setAttribute("aria-current", "page");
    put(root);
    current = render(root, m.slice(1)) || {};
    document.title = `${nav[0].toUpperCase()}${nav.slice(1)} · lockgate`;
    return;
  }
  location.replace("#/overview");
}

/** A selector for the focused control that survives a redraw (its test id within its node, job or schedule). */
function focusKey() {
  const el = document.activeElement;
  const id = el && el.dataset && el.dataset.testid;
  if (!id) return null;
  const owner = el.closest("[data-node],[data-job],[data-schedule]");
  if (!owner) return `[data-testid="${id}"]`;
  const [k, v] = Object.entries(owner.dataset).find(([n]) => ["node", "job", "schedule"].includes(n));
  return `[data-${k}="${CSS.escape(v)}"] [data-testid="${id}"], [data-${k}="${CSS.escape(v)}"][data-testid="${id}"]`;
}

function markStale() {
  stale = true;
  if (timer) return;
  timer = setTimeout(async () => {
    timer = null;
    if (stale && current && current.refresh) {
      stale = false;
      const key = focusKey();
      await current.refresh();
      // A keyboard user's place is kept across the redraw.
      if (key && !document.activeElement?.dataset?.testid) document.querySelector(key)?.focus({ preventScroll: true });
    }
  }, (current && current.refreshMs) || REFRESH_MS);
}

async function connect() {
  const live = document.getElementById("live");
  let after = 0;
  try {
    const o = await get("/v1/ui/overview");
    after = Math.max(0, o.last_seq - 40);
  } catch { /* the stream starts from the beginning */ }
  const es = new EventSource(`/v1/events/stream?after=${after}`);
  es.onopen = () => { live.textContent = "live"; live.classList.add("on"); };
  es.onerror = () => { live.textContent = "reconnecting"; live.classList.remove("on"); };
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    events.push(ev);
    if (events.length > KEEP_EVENTS) events.splice(0, events.length - KEEP_EVENTS);
    if (current && current.onEvent) current.onEvent(ev);
    markStale();
  };
}

async function main() {
  await loadSession();
  // The server renders the token into the form (sign-out works without JavaScript);
  // set it again in case the session was renewed since the page was served.
  document.getElementById("signout-csrf").value = session.csrf;
  put(document.getElementById("whoami"), h("strong", {}, session.name),
    h("span", { class: `pill role` }, session.role));
  window.addEventListener("hashchange", () => {
    navigate();
    document.getElementById("view").focus({ preventScroll: true });
  });
  navigate();
  connect();
}

main();
