// A viewer's session sees and cannot act: no cordon or uncordon buttons, and a forged
// request with its cookie and its own CSRF token, sent from the page itself, is refused by
// the server (403) and changes nothing.
import { test, expect } from '@playwright/test';
import { env, api, signIn } from './lib.js';

const main = env.main;

test('a viewer sees no actions and its forged posts are refused', async ({ page }) => {
  await signIn(page, main, main.viewer);
  const session = await (await page.request.get(`${main.url}/ui/session`)).json();
  expect(session.role).toBe('viewer');
  await page.getByTestId('nav-nodes').click();
  await expect(page.getByTestId('node-card')).toHaveCount(3);
  await expect(page.getByTestId('cordon-button')).toHaveCount(0);
  await expect(page.getByTestId('uncordon-button')).toHaveCount(0);
  await page.getByTestId('nav-policy').click();
  await expect(page.getByTestId('policy-apply-button')).toHaveCount(0);

  const policy = await api(main, '/v1/policy');
  const jobs = (await api(main, '/v1/jobs?limit=1000')).jobs.length;
  // From the page (same origin, the session cookie, the right CSRF token): the role decides.
  const answers = await page.evaluate(async ({ csrf }) => {
    const send = async (method, path, body, type = 'application/json') => {
      const r = await fetch(path, { method, headers: { 'x-csrf-token': csrf, 'content-type': type }, body });
      return [path, r.status];
    };
    return Promise.all([
      send('POST', '/v1/nodes/node-a/cordon'),
      send('PUT', '/v1/policy', '[global]\nmax_running = 1\n', 'application/toml'),
      send('POST', '/v1/jobs', JSON.stringify({ kind: 'backup', attrs: { datastore: 'ds9' } })),
      send('POST', '/v1/ui/codes'),
      send('POST', '/v1/tokens', JSON.stringify({ name: 'mallory', role: 'admin' })),
    ]);
  }, session);
  for (const [path, status] of answers) expect(status, path).toBe(403);
  expect((await api(main, '/v1/nodes')).nodes.find((n) => n.name === 'node-a').cordoned).toBe(false);
  expect((await api(main, '/v1/policy')).digest).toBe(policy.digest);
  expect((await api(main, '/v1/jobs?limit=1000')).jobs.length).toBe(jobs);
  expect((await api(main, '/v1/tokens')).map((t) => t.name)).not.toContain('mallory');
});
