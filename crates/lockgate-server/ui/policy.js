// Policy: the active policy, and a candidate to edit. "Preview" is a dry run
// (PUT /v1/policy?dry_run=true): its diff and the jobs it would admit now, or the
// validation error at its line. "Apply" sends the previewed text with If-Match, so a
// policy changed meanwhile is refused (412) rather than overwritten.

import { get, api, isAdmin } from "./api.js";
import { h, put, jobLink } from "./dom.js";

export function render(root) {
  const editor = h("textarea", { class: "editor", id: "policy-editor", "data-testid": "policy-editor", spellcheck: "false", "aria-describedby": "policy-help" });
  const digest = h("code", {});
  const result = h("div", { "aria-live": "polite" });
  const preview = h("button", { type: "button", class: "primary", "data-testid": "policy-preview-button" }, "Preview changes");
  const apply = h("button", { type: "button", "data-testid": "policy-apply-button", disabled: true }, "Apply");
  const reset = h("button", { type: "button", class: "ghost" }, "Reset to active");
  let active = { digest: "", toml: "" };
  let previewed = null;

  put(root, h("h1", {}, "Policy"),
    h("div", { class: "grid" },
      h("section", { class: "card span-8" },
        h("div", { class: "row" }, h("label", { for: "policy-editor" }, "Candidate policy (TOML)"), h("span", { class: "spacer" }),
          h("span", { class: "small muted" }, "active digest "), digest),
        h("p", { id: "policy-help", class: "small muted" }, isAdmin()
          ? "Edit, preview the diff and the jobs it would admit now, then apply. Apply sends If-Match with the digest you started from."
          : "You can preview a candidate; only an admin can apply one."),
        editor,
        h("div", { class: "row", style: { marginTop: ".6rem" } }, preview, isAdmin() ? apply : null, reset)),
      h("section", { class: "card span-4" }, h("h2", {}, "Preview"), result)));

  editor.addEventListener("input", () => { apply.disabled = true; previewed = null; });
  reset.addEventListener("click", () => { editor.value = active.toml; apply.disabled = true; previewed = null; put(result); });

  function showError(e, text) {
    const lines = text.split("\n");
    const at = e.line ? h("pre", { class: "mono" }, `line ${e.line}: ${lines[e.line - 1] ?? ""}`) : null;
    put(result, h("div", { class: "errbox", "data-testid": "policy-error", "data-line": e.line ?? "", role: "alert" },
      h("strong", {}, e.code === "stale_policy" ? "The active policy changed since you loaded it." : "The candidate is not valid."),
      h("pre", {}, `${e.field ? `${e.field}: ` : ""}${e.message}`), at));
    if (e.line) {
      let start = 0;
      for (let i = 0; i < e.line - 1 && i < lines.length; i++) start += lines[i].length + 1;
      editor.focus();
      editor.setSelectionRange(start, start + (lines[e.line - 1] || "").length);
    }
  }

  function showAnswer(a, applied) {
    const diff = a.diff.length ? h("ul", { class: "diff", "data-testid": "policy-diff" }, a.diff.map((d) => h("li", {}, d)))
      : h("p", { class: "muted", "data-testid": "policy-diff" }, "No changes.");
    const admits = h("div", { "data-testid": "policy-admits", "data-count": a.admitted_now.length },
      a.admitted_now.length ? ["Admits now: ", a.admitted_now.flatMap((id, i) => [i ? ", " : "", jobLink(id)])] : "Admits no waiting job now.");
    put(result, h("div", { class: applied ? "okbox stack" : "stack" },
      applied ? h("strong", {}, "Applied.") : h("strong", {}, "Dry run: nothing applied yet."),
      diff, admits,
      a.over_limit && a.over_limit.length ? h("p", { class: "error" }, `Over their new limit (they drain): ${a.over_limit.join(", ")}`) : null));
  }

  preview.addEventListener("click", async () => {
    const text = editor.value;
    try {
      const a = await api("PUT", "/v1/policy?dry_run=true", text, { type: "application/toml" });
      previewed = text;
      apply.disabled = false;
      showAnswer(a, false);
    } catch (e) {
      apply.disabled = true;
      showError(e, text);
    }
  });

  apply.addEventListener("click", async () => {
    if (previewed === null || previewed !== editor.value) return;
    try {
      const a = await api("PUT", "/v1/policy", previewed, { type: "application/toml", headers: { "If-Match": active.digest } });
      showAnswer(a, true);
      apply.disabled = true;
      await load(true);
    } catch (e) {
      showError(e, previewed);
    }
  });

  async function load(replace) {
    try {
      active = await get("/v1/ui/policy");
      put(digest, active.digest.slice(0, 12));
      if (replace || !editor.value) editor.value = active.toml;
    } catch (e) {
      put(result, h("div", { class: "errbox" }, e.message));
    }
  }
  load(true);
  // Events do not touch the editor: only the digest shown is refreshed.
  return { refresh: async () => { try { const p = await get("/v1/ui/policy"); put(digest, p.digest.slice(0, 12)); } catch { /* shown on the next action */ } }, refreshMs: 3000 };
}
