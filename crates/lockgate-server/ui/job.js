// One job: its timeline with durations, explain with every reason and its numbers, its
// position and estimated start, attributes, lease and attempts.

import { get } from "./api.js";
import { h, put, pill, dur, between, when, chips, jobLink, card } from "./dom.js";

const STEPS = [
  ["submitted_at", "submitted"],
  ["prepare_started_at", "admitted to prepare"],
  ["prepared_at", "prepared"],
  ["started_at", "running"],
  ["finished_at", "finished"],
];

function timeline(j) {
  const items = [];
  let last = null;
  let waiting = false;
  for (const [field, label] of STEPS) {
    const t = j[field];
    if (!t && field === "prepare_started_at" && !j.two_stage) continue;
    if (!t && field === "prepared_at" && !j.two_stage) continue;
    const took = t && last ? dur(between(last, t)) : "";
    items.push(h("li", { class: t ? "done" : "" },
      h("span", { class: "dot", "aria-hidden": "true" }),
      h("strong", {}, label),
      h("span", {}, t ? [h("time", { datetime: t, title: t }, when(t)), took ? h("span", { class: "dur" }, `  after ${took}`) : null]
        : h("span", { class: "muted" }, last && !j.finished_at && !waiting ? `not yet (${dur(between(last))} so far)` : "–"))));
    if (t) last = t;
    else waiting = true;
  }
  if (j.outcome) items.push(h("li", { class: "done" }, h("span", { class: "dot" }), h("strong", {}, "outcome"), h("span", {}, pill(j.outcome), j.message ? ` ${j.message}` : "")));
  return h("ol", { class: "timeline", "data-testid": "job-timeline" }, items);
}

function reasonLine(r) {
  const nums = r.count !== null && r.count !== undefined
    ? h("span", { class: "reason-num" }, ` ${r.count}${r.limit !== null && r.limit !== undefined ? ` / ${r.limit}` : ""}`) : null;
  const holders = r.holders && r.holders.length
    ? h("span", { class: "muted" }, " held by ", r.holders.slice(0, 10).flatMap((id, i) => [i ? ", " : "", jobLink(id)]), r.holders.length > 10 ? ` and ${r.holders.length - 10} more` : "")
    : null;
  const rest = reasonRest(r);
  return h("li", { "data-scope": r.scope || "", "data-kind": r.kind },
    r.scope ? h("code", {}, r.scope) : h("code", {}, r.kind), nums, rest ? [" — ", rest] : null, holders);
}

/**
 * What a capacity reason's text says beyond the scope, its numbers and its holders, all
 * shown beside it ("node:n1: 3/3 (rule "disk=ssd")" leaves `(rule "disk=ssd")`); any other
 * reason's text whole.
 */
function reasonRest(r) {
  if (r.kind !== "capacity" || !r.scope) return r.text;
  let t = r.text;
  if (t.startsWith(`${r.scope}: `)) t = t.slice(r.scope.length + 2);
  t = t.replace(new RegExp(`^${r.count}\\s*/\\s*${r.limit ?? ""}\\s*`), "");
  if (r.holders && r.holders.length) t = t.replace(/\((?:job|jobs) [\d, ]+\)/, "");
  return t.trim();
}

function explainView(x, j) {
  if (!x) {
    const why = j.state === "queued" ? "Loading explain…" : j.finished_at ? `It does not wait: it ended (${j.state}).` : `It does not wait: it holds its slots (${j.state}).`;
    return h("p", { class: "muted" }, why);
  }
  return h("div", { "data-testid": "job-explain" },
    h("p", {}, h("strong", {}, `Position ${x.position}`), ` in the queue · effective priority ${x.effective_priority}`),
    x.reasons.length ? h("ul", { class: "reasons" }, x.reasons.map(reasonLine)) : null,
    h("pre", { class: "text" }, x.text));
}

function estimateView(x) {
  const e = x && x.estimate;
  if (!e) return h("p", { class: "muted", "data-testid": "job-estimate" }, "No estimate (only a queued job has one).");
  // A time already past is never shown as the future: the job is overdue against its
  // estimate (the next forecast moves it).
  const t = (v) => {
    if (!v) return "unknown: no history for this kind yet";
    const ahead = between(new Date().toISOString(), v);
    const rel = ahead >= 0 ? ` (${dur(ahead)} from now)` : ` (overdue by ${dur(-ahead)}: the estimate is past)`;
    return [h("time", { datetime: v, title: v }, when(v)), rel];
  };
  return h("dl", { class: "props", "data-testid": "job-estimate" },
    h("dt", {}, "start (p50)"), h("dd", {}, t(e.start_p50)),
    h("dt", {}, "start (p90)"), h("dd", {}, t(e.start_p90)),
    h("dt", {}, "end (p50)"), h("dd", {}, t(e.end_p50)),
    h("dt", {}, "forecast from"), h("dd", {}, e.computed_at ? when(e.computed_at) : "–"));
}

function props(j) {
  const lease = j.lease ? `token ${j.lease.token}, expires ${when(j.lease.expires_at)} (ttl ${dur(j.lease.ttl_s)})` : "none";
  const rows = [
    ["owner", j.owner], ["kind", h("code", {}, j.kind)], ["executor", j.executor], ["priority", j.priority],
    ["node", j.node || (j.node_selector ? `any node with ${j.node_selector}` : "any")],
    ["attempt", `${j.attempt}${j.preemptions ? ` (${j.preemptions} preempted)` : ""}`],
    ["lease", lease], ["two-stage", j.two_stage ? "yes" : "no"], ["cost", chips(j.cost)],
    ["after", j.after && j.after.length ? j.after.flatMap((id, i) => [i ? ", " : "", jobLink(id)]) : null],
    ["after_ok", j.after_ok && j.after_ok.length ? j.after_ok.flatMap((id, i) => [i ? ", " : "", jobLink(id)]) : null],
    ["cancel", j.cancel_requested ? `requested (${j.cancel_reason || "cancel"})` : null],
    ["admission", j.unadmitted ? h("span", { class: "pill over" }, "none: ran while the server was unreachable (--if-unreachable run), reported afterwards") : null],
    ["expected", j.expected ? ["run ", j.expected.run ? `p50 ${dur(j.expected.run.p50_s)}, p90 ${dur(j.expected.run.p90_s)} (${j.expected.run.samples} runs${j.expected.run.key && j.expected.run.key.length ? " of " + j.expected.run.key.join(",") : ""})` : "unknown"] : null],
  ].filter(([, v]) => v !== null && v !== undefined && v !== "");
  return h("dl", { class: "props" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export function render(root, [id]) {
  const head = h("div", {});
  const body = h("div", { class: "grid" });
  const error = h("div", { role: "alert" });
  put(root, h("p", {}, h("a", { href: "#/queue" }, "← Queue")), head, error, body);

  async function refresh() {
    let j;
    try {
      j = await get(`/v1/jobs/${id}`);
    } catch (e) {
      put(head, h("h1", {}, `Job #${id}`));
      put(error, h("div", { class: "errbox" }, e.message));
      return;
    }
    let x = null;
    if (j.state === "queued") {
      try { x = await get(`/v1/jobs/${id}/explain`); } catch (e) { x = { position: "?", effective_priority: "?", reasons: [], text: e.message }; }
    }
    put(error);
    put(head, h("div", { class: "row" }, h("h1", {}, `Job #${j.id} `, h("span", { class: "mono" }, j.kind)), pill(j.state)));
    put(body,
      card("Timeline", "span-6", timeline(j)),
      card("Why it waits", "span-6", explainView(x, j)),
      card("Estimated start", "span-6", estimateView(x)),
      card("Attributes", "span-6", chips(j.attrs)),
      card("Job", "span-12", props(j)));
  }
  refresh();
  return {
    refresh,
    refreshMs: 1000,
  };
}
