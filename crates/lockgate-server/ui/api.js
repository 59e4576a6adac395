// The API from the browser: the session cookie is the credential, and every request that
// is not a read carries the session's CSRF token. Errors keep the server's
// {"error": {code, message, field}} so a page can show them as they are.

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "";
    this.field = e.field || null;
    this.line = e.line ?? null;
  }
}

export const session = { name: "", role: "", csrf: "", expires: "" };

/** Whether the session may act (admin). */
export const isAdmin = () => session.role === "admin";

/** Reads the session; on 401 goes back to the sign-in page. */
export async function loadSession() {
  const r = await fetch("/ui/session", { credentials: "same-origin" });
  if (r.status === 401) {
    location.assign("/ui/");
    throw new ApiError(401, null);
  }
  Object.assign(session, await r.json());
  return session;
}

/** One API call; `body` is sent as JSON unless `type` says otherwise. */
export async function api(method, path, body, { type, headers } = {}) {
  const h = { Accept: "application/json", ...(headers || {}) };
  if (method !== "GET") h["X-CSRF-Token"] = session.csrf;
  let payload;
  if (body !== undefined) {
    h["Content-Type"] = type || "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  const r = await fetch(path, { method, headers: h, body: payload, credentials: "same-origin" });
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (r.status === 401) {
    location.assign("/ui/");
  }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

export const get = (path) => api("GET", path);

/** The last events of the live stream, newest last, shared by every view (app.js fills it). */
export const events = [];
