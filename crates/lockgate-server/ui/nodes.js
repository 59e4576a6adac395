// Nodes: labels, number and the rule that set it, running/prepared/preparing, the kinds
// its agent has handlers for, and cordon/uncordon. Only an admin's page has the buttons;
// the server refuses anyone else anyway.

import { get, api, isAdmin } from "./api.js";
import { h, put, chips, rel } from "./dom.js";
import { nodeCard } from "./overview.js";
import { throughputCharts } from "./charts.js";

export function render(root) {
  const error = h("div", { role: "alert" });
  const grid = h("div", { class: "nodes full" });
  const filter = h("input", { id: "node-filter", type: "search", placeholder: "name or label", autocomplete: "off" });
  const count = h("span", { class: "muted" });
  const rates = h("div", { "data-testid": "node-throughput" });
  let nodes = [];
  filter.addEventListener("input", draw);
  put(root, h("h1", {}, "Nodes"),
    h("div", { class: "row", style: { marginBottom: ".8rem" } },
      h("label", { for: "node-filter" }, "Filter"), filter, count),
    error, grid,
    h("h2", {}, "Throughput and pressure, last hour"), rates);

  async function act(name, verb) {
    try {
      await api("POST", `/v1/nodes/${encodeURIComponent(name)}/${verb}`);
      put(error);
      await refresh();
      // The button became its opposite: keep the keyboard on it.
      grid.querySelector(`[data-node="${CSS.escape(name)}"] button`)?.focus();
    } catch (e) {
      put(error, h("div", { class: "errbox" }, `${verb} ${name}: ${e.message}`));
    }
  }

  function details(n) {
    const kinds = n.kinds && n.kinds.length ? h("span", { class: "kv" }, n.kinds.map((k) => h("code", {}, k))) : h("span", { class: "muted" }, "none reported");
    const button = !isAdmin() ? null : n.cordoned
      ? h("button", { type: "button", "data-testid": "uncordon-button", onclick: () => act(n.name, "uncordon") }, "Uncordon")
      : h("button", { type: "button", class: "danger", "data-testid": "cordon-button", onclick: () => act(n.name, "cordon") }, "Cordon");
    return h("div", { class: "stack small", style: { marginTop: ".3rem" } },
      h("div", {}, h("span", { class: "muted" }, "labels "), chips(n.labels)),
      h("div", {}, h("span", { class: "muted" }, "kinds "), kinds),
      Object.keys(n.resources || {}).length ? h("div", {}, h("span", { class: "muted" }, "resources "), chips(n.resources)) : null,
      h("div", { class: "muted" }, `${n.running} running · ${n.prepared} prepared · ${n.preparing} preparing · seen ${rel(n.last_seen)}`),
      button ? h("div", {}, button) : null);
  }

  function draw() {
    const q = filter.value.trim().toLowerCase();
    const shown = nodes.filter((n) => !q || n.name.includes(q) || Object.entries(n.labels).some(([k, v]) => `${k}=${v}`.includes(q)));
    put(count, `${shown.length} of ${nodes.length} nodes`);
    put(grid, shown.length ? shown.map((n) => nodeCard(n, details(n))) : h("p", { class: "muted" }, "No nodes."));
  }

  async function refresh() {
    try {
      nodes = (await get("/v1/nodes")).nodes;
      draw();
      put(rates, throughputCharts(await get("/v1/ui/throughput"), "nodes"));
    } catch (e) {
      put(error, h("div", { class: "errbox" }, e.message));
    }
  }
  refresh();
  return { refresh, refreshMs: 1000 };
}
