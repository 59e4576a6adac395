// Pictures drawn as SVG from the API's numbers: scope occupancy over time (with the
// limit as a dashed line) and waits by kind. Each picture has a text alternative.

import { h, s, dur } from "./dom.js";

const W = 320, H = 110, L = 30, B = 18, T = 8, R = 8;
const MAX_CHARTS = 8;

/** Small multiples: one area chart per busiest scope. */
export function occupancyCharts(occ) {
  const series = occ.series.filter((x) => x.peak.some((v) => v > 0) || x.limit).slice(0, MAX_CHARTS);
  if (!series.length) return h("p", { class: "muted" }, "No scope was used in this window.");
  const note = occ.truncated ? h("p", { class: "muted small" }, `Only the first ${occ.events} events of the window were replayed.`) : null;
  return [h("div", { class: "charts" }, series.map((x) => chart(x, occ))), note];
}

function chart(x, occ) {
  const n = x.peak.length;
  const top = Math.max(1, x.limit ?? 0, ...x.peak);
  const px = (i) => L + ((W - L - R) * i) / Math.max(1, n - 1);
  const py = (v) => T + (H - T - B) * (1 - v / top);
  let d = `M ${px(0)} ${py(0)}`;
  x.peak.forEach((v, i) => { d += ` L ${px(i)} ${py(v)}`; });
  d += ` L ${px(n - 1)} ${py(0)} Z`;
  const max = Math.max(...x.peak);
  const label = `${x.scope}: at most ${max} in use between ${new Date(occ.from).toLocaleTimeString()} and ${new Date(occ.until).toLocaleTimeString()}${x.limit ? `, limit ${x.limit}` : ""}`;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label },
    s("title", {}, label),
    s("line", { class: "grid", x1: L, x2: W - R, y1: py(0), y2: py(0) }),
    s("line", { class: "grid", x1: L, x2: W - R, y1: py(top), y2: py(top) }),
    s("text", { x: L - 4, y: py(0) + 4, "text-anchor": "end" }, "0"),
    s("text", { x: L - 4, y: py(top) + 4, "text-anchor": "end" }, String(top)),
    s("path", { class: "area", d }),
    x.limit ? s("line", { class: "limit", x1: L, x2: W - R, y1: py(x.limit), y2: py(x.limit) }) : null,
    s("text", { x: L, y: H - 3 }, new Date(occ.from).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })),
    s("text", { x: W - R, y: H - 3, "text-anchor": "end" }, "now"));
  return h("figure", { style: { margin: 0 } }, h("figcaption", { class: "chart-title mono", title: x.scope }, x.scope), svg);
}

/** Horizontal bars: seconds jobs of each kind waited before admission. */
export function waitsChart(waits) {
  const rows = Object.entries(waits || {}).sort((a, b) => b[1] - a[1]).slice(0, 10);
  if (!rows.length) return h("p", { class: "muted" }, "No job was admitted in this window.");
  const max = Math.max(...rows.map((r) => r[1]), 1);
  return h("ul", { class: "depth wide" }, rows.map(([k, v]) => h("li", {},
    h("span", { class: "label mono", title: k }, k),
    h("span", { class: "bar", role: "img", "aria-label": `${k}: ${dur(v)} waited in total` }, h("span", { style: { width: `${(100 * v) / max}%` } })),
    h("span", { class: "num" }, dur(v)))));
}

/** Bytes in binary units: 1.5 MiB. */
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
}

/** Small multiples: bytes per second over the last hour, one chart per scope, or per node
 *  with its memory and IO pressure as dashed lines on a scale of 0-100%. */
export function throughputCharts(tp, which) {
  const nodes = which === "nodes";
  const all = nodes ? tp.nodes : tp.scopes;
  const series = all.filter((x) => x.bytes_per_s.some((v) => v)).slice(0, MAX_CHARTS);
  if (!series.length) return h("p", { class: "muted" }, "No running job reported what it moved in the last hour.");
  const t = tp.at.map((a) => Date.parse(a));
  return h("div", { class: "charts" }, series.map((x) => rateChart(x, t, nodes)));
}

function rateChart(x, t, node) {
  const t0 = Math.min(...t), t1 = Math.max(t0 + 1, ...t);
  const rates = x.bytes_per_s.filter((v) => v != null);
  const top = Math.max(1, ...rates);
  const px = (ms) => L + ((W - L - R) * (ms - t0)) / (t1 - t0);
  const py = (v, max) => T + (H - T - B) * (1 - v / max);
  // A gap (no sample for it) lifts the pen; a lone point is a short tick.
  const path = (vals, max) => {
    let d = "", pen = false;
    vals.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      d += `${pen ? "L" : "M"} ${px(t[i]).toFixed(1)} ${py(v, max).toFixed(1)} `;
      if (!pen && vals[i + 1] == null) d += "h 1.5 ";
      pen = true;
    });
    return d;
  };
  const last = rates[rates.length - 1] ?? 0;
  const peakMem = Math.max(0, ...(x.memory || []).filter((v) => v != null));
  const label = `${x.name}: ${bytes(last)}/s at the last sample, at most ${bytes(top)}/s in the last hour` +
    (node ? `; memory pressure at most ${peakMem.toFixed(1)}%` : "");
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, "data-testid": "throughput-chart" },
    s("title", {}, label),
    s("line", { class: "grid", x1: L, x2: W - R, y1: py(0, 1), y2: py(0, 1) }),
    s("line", { class: "grid", x1: L, x2: W - R, y1: py(1, 1), y2: py(1, 1) }),
    s("text", { x: L - 4, y: py(0, 1) + 4, "text-anchor": "end" }, "0"),
    // The scale's top inside the plot: a rate is wider than the margin.
    s("text", { x: L + 4, y: py(1, 1) + 11 }, `${bytes(top)}/s`),
    s("path", { class: "rate", d: path(x.bytes_per_s, top) }),
    node ? s("path", { class: "pressure memory", d: path(x.memory || [], 100) }) : null,
    node ? s("path", { class: "pressure io", d: path(x.io || [], 100) }) : null,
    s("text", { x: L, y: H - 3 }, new Date(t0).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })),
    s("text", { x: W - R, y: H - 3, "text-anchor": "end" }, node ? "dashed: pressure 0-100%" : "now"));
  return h("figure", { style: { margin: 0 } }, h("figcaption", { class: "chart-title mono", title: x.name }, x.name), svg);
}
