// Sign-out ends the session on the server: the page shows the sign-in form again, and the
// old cookie, replayed, is refused everywhere (401).
import { test, expect, request } from '@playwright/test';
import { env, signIn, sessionCookie } from './lib.js';

const main = env.main;

test('sign out, and the old cookie is refused', async ({ page }) => {
  await signIn(page, main);
  const old = await sessionCookie(page.context());
  expect(old).toBeDefined();
  await page.getByTestId('signout-button').click();
  await expect(page.locator('form[action="/ui/login"]')).toBeVisible();
  await expect(page.getByTestId('nav-overview')).toHaveCount(0);

  // Replay the old cookie from a fresh client, as a thief would.
  const thief = await request.newContext({ extraHTTPHeaders: { cookie: `lockgate_session=${old.value}` } });
  for (const path of ['/ui/session', '/v1/jobs', '/v1/nodes', '/v1/ui/overview']) {
    expect((await thief.get(`${main.url}${path}`)).status(), path).toBe(401);
  }
  const cordon = await thief.post(`${main.url}/v1/nodes/node-a/cordon`, { headers: { origin: main.url } });
  expect(cordon.status()).toBe(401);
  await thief.dispose();

  // And the browser itself, reloading: the sign-in page, not the app.
  await page.goto(`${main.url}/ui/#/overview`);
  await expect(page.locator('form[action="/ui/login"]')).toBeVisible();
  expect((await page.request.get(`${main.url}/ui/session`)).status()).toBe(401);
});
