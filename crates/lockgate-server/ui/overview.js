// Overview: the scopes as bars, the nodes' slots, the queue's depth, the oldest waiting
// job, the live event stream and the history charts. Everything but the charts reloads
// on events (app.js throttles); the charts reload every CHART_MS.

import { get, events } from "./api.js";
import { h, put, dur, when, jobLink, card, pill } from "./dom.js";
import { occupancyCharts, waitsChart, throughputCharts } from "./charts.js";

const CHART_MS = 30000;

/** What an unlimited scope's bar is drawn against: the largest use among the scopes shown. */
let unlimitedScale = 1;

/** One scope's bar, with the contract's data attributes. */
export function scopeBar(sc) {
  const conflict = sc.rule.startsWith("conflict");
  const scale = Math.max(sc.limit ?? unlimitedScale, sc.used, 1);
  const pct = (n) => `${(100 * n) / scale}%`;
  const over = sc.over_limit;
  const label = `${sc.scope}: ${sc.used} of ${sc.limit ?? "unlimited"} in use (${sc.running} running, ${sc.prepared} prepared, ${sc.preparing} preparing)${over ? ", over its limit" : ""}`;
  return h("div", {
    class: `scope${over ? " over" : ""}`, "data-testid": "scope-bar", "data-scope": sc.scope,
    "data-used": sc.used, "data-running": sc.running, "data-limit": sc.limit ?? "",
    "data-prepared": sc.prepared, "data-preparing": sc.preparing, "data-over": over ? "true" : "false",
  },
    h("span", { class: "name", title: sc.scope }, over ? [h("span", { class: "pill over" }, "over limit"), " "] : null,
      h("span", { class: "mono" }, sc.scope)),
    h("div", { class: "bar", role: "img", "aria-label": label, title: label },
      h("span", { class: "running", style: { width: pct(sc.running) } }),
      h("span", { class: "prepared", style: { width: pct(sc.prepared) } }),
      h("span", { class: "preparing", style: { width: pct(sc.preparing) } }),
      h("span", { class: "other", style: { width: pct(Math.max(0, sc.used - sc.running - sc.prepared - sc.preparing)) } })),
    h("span", { class: "num" }, conflict && sc.limit === null ? (sc.used ? "held" : "free") : `${sc.used} / ${sc.limit ?? "∞"}`));
}

export function legend() {
  return h("div", { class: "legend" },
    h("span", {}, h("i", { class: "sw-running" }), "running"),
    h("span", {}, h("i", { class: "sw-prepared" }), "prepared"),
    h("span", {}, h("i", { class: "sw-preparing" }), "preparing"),
    h("span", {}, h("i", { class: "sw-free" }), "free"),
    h("span", {}, "red outline: over its limit (draining)"));
}

/** One node's card: its slots as squares, its number and the rule that set it. */
export function nodeCard(n, extra) {
  const slots = n.number;
  const held = [["running", n.running], ["prepared", n.prepared], ["preparing", n.preparing]];
  const squares = [];
  for (const [cls, count] of held) for (let i = 0; i < count; i++) squares.push(h("span", { class: `slot ${cls}`, title: cls }));
  if (slots !== null && slots !== undefined) for (let i = n.running + n.prepared + n.preparing; i < slots; i++) squares.push(h("span", { class: "slot", title: "free" }));
  const rule = n.rule ? `rule ${n.rule}` : slots === null || slots === undefined ? "unlimited" : "[nodes] max_running";
  return h("div", {
    class: `node ${n.state}`, "data-testid": "node-card", "data-node": n.name,
    "data-slots": slots ?? "", "data-running": n.running, "data-prepared": n.prepared, "data-preparing": n.preparing,
  },
    h("div", { class: "row" }, h("span", { class: "nm", title: n.name }, n.name), h("span", { class: "spacer" }),
      n.state !== "ready" ? pill(n.state) : null),
    h("div", { class: "slots", role: "img", "aria-label": `${n.running} running, ${n.prepared} prepared, ${n.preparing} preparing of ${slots ?? "unlimited"} slots` },
      squares.length > 40 ? h("span", { class: "small" }, `${n.running} running`) : squares),
    h("div", { class: "small muted" }, `${n.running}/${slots ?? "∞"} running · ${rule}`),
    extra || null);
}

/** A short line for an event. */
export function eventText(ev) {
  const d = ev; // an EventView: {seq, at, type, ...} (its data is flattened)
  if (d.type === "job" && d.job) {
    const j = d.job;
    const change = (d.change || "").replace(/_/g, " ");
    const where = j.node ? ` on ${j.node}` : "";
    return [jobLink(j.id), ` ${j.kind} ${change}${where}`, j.state && j.state !== "queued" ? [" → ", pill(j.state)] : null];
  }
  if (d.node) return `node ${d.node} ${d.type.replace(/_/g, " ")}${d.state ? ` (${d.state})` : ""}`;
  if (d.type === "policy_applied") return `policy applied${d.over_limit && d.over_limit.length ? `; over limit: ${d.over_limit.join(", ")}` : ""}`;
  return d.type ? d.type.replace(/_/g, " ") : "event";
}

export function eventList() {
  const items = events.slice(-60).reverse().map((ev) => h("li", {},
    h("time", { datetime: ev.at, title: ev.at }, new Date(ev.at).toLocaleTimeString()),
    h("span", {}, eventText(ev))));
  return items.length ? items : [h("li", { class: "muted" }, h("span", {}), "No events yet.")];
}

function depth(map) {
  const rows = Object.entries(map).sort((a, b) => b[1] - a[1]);
  if (!rows.length) return h("p", { class: "muted" }, "Nothing queued.");
  const max = rows[0][1];
  return h("ul", { class: "depth" }, rows.slice(0, 12).map(([k, n]) => h("li", {},
    h("span", { class: "label mono", title: k }, k),
    h("span", { class: "bar" }, h("span", { style: { width: `${(100 * n) / max}%` } })),
    h("span", { class: "num" }, n))),
    rows.length > 12 ? h("li", { class: "muted" }, `and ${rows.length - 12} more`) : null);
}

/** Least milliseconds between two loads of the forecast picture (events come in bursts). */
const GANTT_MS = 5000;

/**
 * The forecast's picture (`GET /v1/forecast/gantt`, drawn by the simulator's writer):
 * an <img> whose `?at=` changes at most every GANTT_MS, so a burst of events loads it once.
 */
function ganttCard() {
  const img = h("img", { alt: "Forecast of the queue: one lane group per node, one bar per job", "data-testid": "forecast-gantt" });
  const link = h("a", { href: "/v1/forecast/gantt", target: "_blank", rel: "noopener", class: "small" }, "Open full size");
  const el = h("div", { class: "gantt" }, h("div", { class: "gantt-scroll" }, img), link);
  let last = 0;
  let timer = null;
  function load() {
    timer = null;
    last = Date.now();
    img.src = `/v1/forecast/gantt?hours=6&at=${last}`;
  }
  function reload() {
    if (timer) return;
    const wait = Math.max(0, last + GANTT_MS - Date.now());
    timer = setTimeout(load, wait);
  }
  return { el, reload };
}

export function render(root) {
  const stats = h("div", { class: "stats" });
  const scopes = h("div", { class: "scopes" });
  const nodes = h("div", { class: "nodes" });
  const byKind = h("div", {});
  const byOwner = h("div", {});
  const stream = h("ul", { class: "events", "data-testid": "event-stream", "aria-live": "off" });
  const charts = h("div", {}, h("p", { class: "muted" }, "Loading history…"));
  const waits = h("div", {});
  const rates = h("div", { "data-testid": "throughput" });
  const gantt = ganttCard();
  const error = h("p", { class: "error", role: "alert" });
  put(root, h("h1", {}, "Overview"), error,
    h("div", { class: "grid" },
      card(null, "span-12", stats),
      card("Scopes", "span-8", legend(), scopes),
      card("Events", "span-4", stream),
      card("Nodes", "span-12", nodes),
      card("Queued by kind", "span-6", byKind),
      card("Queued by owner", "span-6", byOwner),
      card("Scope occupancy, last 6 hours", "span-8", charts),
      card("Waits by kind, last 6 hours", "span-4", waits),
      card("Throughput per scope, last hour", "span-12", rates),
      card("Forecast, next 6 hours (p50)", "span-12", gantt.el)));

  async function refresh() {
    try {
      const [o, n] = await Promise.all([get("/v1/ui/overview"), get("/v1/nodes")]);
      put(error);
      const st = o.states;
      const old = o.oldest_waiting;
      put(stats,
        ...["queued", "preparing", "prepared", "running"].map((k) =>
          h("div", { class: "stat", "data-testid": `count-${k}` }, h("div", { class: "n" }, st[k] ?? 0), h("div", { class: "l" }, k))),
        h("div", { class: "stat", "data-testid": "oldest-waiting" },
          h("div", { class: "n" }, old ? dur(old.waited_s) : "–"),
          h("div", { class: "l" }, old ? ["oldest waiting: ", jobLink(old.id), ` ${old.kind} (${old.owner})`] : "nothing waits")));
      unlimitedScale = Math.max(1, ...o.scopes.filter((x) => x.limit === null && !x.rule.startsWith("conflict")).map((x) => x.used));
      put(scopes, o.scopes.length ? o.scopes.map(scopeBar) : h("p", { class: "muted" }, "No limits in the policy and nothing running."),
        o.scopes_omitted ? h("p", { class: "muted small" }, `${o.scopes_omitted} more scopes not shown`) : null);
      put(nodes, n.nodes.length ? n.nodes.map((x) => nodeCard(x)) : h("p", { class: "muted" }, "No nodes registered."));
      put(byKind, depth(o.queued_by_kind));
      put(byOwner, depth(o.queued_by_owner));
      gantt.reload();
    } catch (e) {
      put(error, `Could not load the overview: ${e.message}`);
    }
  }

  async function history() {
    try {
      const occ = await get("/v1/ui/occupancy?hours=6");
      put(charts, occupancyCharts(occ));
      put(waits, waitsChart(occ.waits_by_kind));
      put(rates, throughputCharts(await get("/v1/ui/throughput"), "scopes"));
    } catch (e) {
      put(charts, h("p", { class: "muted" }, e.status === 403 ? "History is for admins and viewers." : `History unavailable: ${e.message}`));
      put(waits);
    }
  }

  put(stream, eventList());
  refresh();
  history();
  const t = setInterval(() => { if (document.body.contains(charts)) history(); else clearInterval(t); }, CHART_MS);
  return {
    refresh,
    onEvent(ev) {
      put(stream, eventList());
      // A new policy moves the limit lines: redraw the charts at once.
      if (ev.type === "policy_applied") history();
    },
  };
}
