// What every spec shares: the servers scripts/checks/browser started, a bearer-token API
// client (the numbers the page must show are read through it), sign-in through the real
// form, and screenshots into target/ui-screens/.
import { readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from '@playwright/test';

const envFile = process.env.LOCKGATE_UI_ENV;
if (!envFile) throw new Error('LOCKGATE_UI_ENV is not set: run scripts/checks/browser');
/** `{main: {url, admin, viewer, alice, jobs}, load: {url, admin, queued, nodes}}` */
export const env = JSON.parse(readFileSync(envFile, 'utf8'));

const screens = process.env.LOCKGATE_UI_SCREENS ?? 'screens';
mkdirSync(screens, { recursive: true });

/** Saves a full-page screenshot as target/ui-screens/NAME.png. */
export async function shot(page, name) {
  await page.screenshot({ path: join(screens, `${name}.png`), fullPage: true });
}

export const screensDir = screens;

/** A bearer-token request to SERVER (`env.main` or `env.load`); the parsed JSON answer. */
export async function api(server, path, { method = 'GET', body, token, type, headers } = {}) {
  const res = await fetch(server.url + path, {
    method,
    headers: {
      authorization: `Bearer ${token ?? server.admin}`,
      ...(body === undefined ? {} : { 'content-type': type ?? 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text;
}

/** Every active job (queued, preparing, prepared, running), all pages. */
export async function activeJobs(server) {
  const jobs = [];
  let after = null;
  for (;;) {
    const page = await api(server, `/v1/jobs?active=true&limit=1000${after ? `&after=${after}` : ''}`);
    jobs.push(...page.jobs);
    if (page.next == null) return jobs;
    after = page.next;
  }
}

/** `scope -> {running, limit}` from /metrics (units in use, the limit or null). */
export async function metricsScopes(server) {
  const res = await fetch(`${server.url}/metrics`);
  const text = await res.text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^lockgate_scope_(running|limit)\{scope="((?:[^"\\]|\\.)*)"\} (\S+)$/);
    if (!m) continue;
    const scope = m[2].replace(/\\(.)/g, '$1');
    out[scope] ??= { running: 0, limit: null };
    out[scope][m[1]] = Number(m[3]);
  }
  return out;
}

/** Signs in through the plain sign-in form and waits for the app's overview. */
export async function signIn(page, server, token = server.admin) {
  await page.goto(`${server.url}/ui/`);
  const form = page.locator('form[action="/ui/login"]');
  await expect(form).toBeVisible();
  await form.locator('input[name="token"]').fill(token);
  await Promise.all([page.waitForURL(`${server.url}/ui/**`), form.locator('[type="submit"]').click()]);
  await expect(page.getByTestId('nav-overview')).toBeVisible();
}

/** Opens a hash route of the app (`overview`, `queue`, `jobs/7`...). */
export async function open(page, server, route) {
  await page.goto(`${server.url}/ui/#/${route}`);
}

/** The `data-*` attributes of every element with data-testid TESTID, as objects. */
export async function dataOf(page, testid) {
  return page.getByTestId(testid).evaluateAll((els) => els.map((e) => ({ ...e.dataset, text: e.textContent })));
}

/** The value of the session cookie in the page's context. */
export async function sessionCookie(context) {
  const c = (await context.cookies()).find((c) => c.name === 'lockgate_session');
  return c;
}

/** Every scope bar equals GET /v1/ui/overview's scope, and its units in use /metrics'. */
export async function expectBarsMatchApi(page, server) {
  await expect(page.getByTestId('scope-bar').first()).toBeVisible();
  // The page follows the server; read both until they agree (the API is read each time).
  await expect(async () => {
    const [overview, metrics, bars] = await Promise.all([
      api(server, '/v1/ui/overview'),
      metricsScopes(server),
      dataOf(page, 'scope-bar'),
    ]);
    const shown = Object.fromEntries(bars.map((b) => [b.scope, b]));
    expect(Object.keys(shown).sort()).toEqual(overview.scopes.map((s) => s.scope).sort());
    for (const s of overview.scopes) {
      const bar = shown[s.scope];
      expect(Number(bar.running), `${s.scope} running`).toBe(s.running);
      expect(Number(bar.prepared), `${s.scope} prepared`).toBe(s.prepared);
      expect(Number(bar.preparing), `${s.scope} preparing`).toBe(s.preparing);
      expect(bar.limit ?? '', `${s.scope} limit`).toBe(s.limit == null ? '' : String(s.limit));
      const m = metrics[s.scope];
      if (m) {
        expect(s.running + s.prepared + s.preparing, `${s.scope} units in use (metrics)`).toBe(m.running);
        expect(s.limit, `${s.scope} limit (metrics)`).toBe(m.limit);
      }
    }
  }).toPass({ timeout: 10_000 });
}

/** Every node card equals GET /v1/nodes: its number (slots) and its running count. */
export async function expectNodesMatchApi(page, server) {
  await expect(async () => {
    const [{ nodes }, cards] = await Promise.all([api(server, '/v1/nodes'), dataOf(page, 'node-card')]);
    const shown = Object.fromEntries(cards.map((c) => [c.node, c]));
    expect(Object.keys(shown).sort()).toEqual(nodes.map((n) => n.name).sort());
    for (const n of nodes) {
      expect(shown[n.name].slots ?? '', `${n.name} slots`).toBe(n.number == null ? '' : String(n.number));
      expect(Number(shown[n.name].running), `${n.name} running`).toBe(n.running);
    }
  }).toPass({ timeout: 10_000 });
}

/** Sets a queue filter as a person would: picks the option, or types and leaves the field. */
export async function setFilter(page, testid, value) {
  const el = page.getByTestId(testid);
  if ((await el.evaluate((e) => e.tagName)) === 'SELECT') {
    await el.selectOption(value);
  } else {
    await el.fill(value);
    await el.press('Tab');
  }
}

/** Expects the page's explain to name every reason the API's explain gives, with its numbers. */
export async function expectExplainMatchesApi(page, server, id) {
  await expect(async () => {
    const explain = await api(server, `/v1/jobs/${id}/explain`);
    const shown = await page.getByTestId('job-explain').textContent();
    expect(explain.reasons.length).toBeGreaterThan(0);
    for (const r of explain.reasons) {
      expect(shown).toContain(r.scope);
      // A capacity reason with its numbers ("2/2"); any other as the API words it.
      if (r.kind === 'capacity' && r.limit != null) {
        expect(shown).toMatch(new RegExp(`\\b${r.count}\\s*/\\s*${r.limit}\\b`));
      } else {
        expect(shown).toContain(r.text);
      }
    }
  }).toPass({ timeout: 10_000 });
  return api(server, `/v1/jobs/${id}/explain`);
}
