// Small DOM and formatting helpers. Every text goes in through textContent (h() never
// parses HTML), so server data cannot inject markup.

/** h("a", {href: "#/x", class: "y"}, "text", child) builds an element. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

/** Replaces the children of `el`. */
export function put(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** "1 h 4 min", "12 s", "850 ms". */
export function dur(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

/** Seconds between two RFC 3339 times (b defaults to now). */
export function between(a, b) {
  if (!a) return null;
  const end = b ? Date.parse(b) : Date.now();
  return (end - Date.parse(a)) / 1000;
}

/** A time as the browser's local clock shows it, with the date when not today. */
export function when(t) {
  if (!t) return "";
  const d = new Date(t);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

/** "3 min ago" / "in 3 min". */
export function rel(t) {
  if (!t) return "";
  const s = between(t);
  return s >= 0 ? `${dur(s)} ago` : `in ${dur(-s)}`;
}

/** A state pill. */
export function pill(state, text) {
  return h("span", { class: `pill ${state}` }, text || state);
}

/** `k=v` chips of a map. */
export function chips(map) {
  const entries = Object.entries(map || {});
  if (!entries.length) return h("span", { class: "muted" }, "none");
  return h("span", { class: "kv" }, entries.map(([k, v]) => h("code", {}, `${k}=${v}`)));
}

/** A job link. */
export function jobLink(id) {
  return h("a", { href: `#/jobs/${id}` }, `#${id}`);
}

/** A card with a heading. */
export function card(title, cls, ...children) {
  return h("section", { class: `card ${cls || ""}` }, title ? h("h2", {}, title) : null, ...children);
}
