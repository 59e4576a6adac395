// Sign-in: /ui/ answers the plain form to anyone; a bad token is refused with the error on
// the page; the form works without JavaScript and sets an HttpOnly, SameSite=Strict cookie
// with an expiry; with JavaScript the app opens on the overview, as the token's role.
import { test, expect } from '@playwright/test';
import { env, api, signIn, sessionCookie } from './lib.js';

const main = env.main;

test('GET /ui/ answers the sign-in page, 200 text/html, no redirect', async () => {
  const res = await fetch(`${main.url}/ui/`, { redirect: 'manual' });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  const html = await res.text();
  expect(html).toMatch(/<form[^>]*method="post"[^>]*action="\/ui\/login"|<form[^>]*action="\/ui\/login"[^>]*method="post"/);
  expect(html).toContain('name="token"');
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('a wrong token is refused with an error on the page', async ({ page }) => {
    await page.goto(`${main.url}/ui/`);
    await page.locator('input[name="token"]').fill('not-a-token');
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${main.url}/ui/login`),
      page.locator('form[action="/ui/login"] [type="submit"]').click(),
    ]);
    expect(res.status()).toBe(401);
    await expect(page.locator('#login-error')).toBeVisible();
    await expect(page.locator('#login-error')).not.toBeEmpty();
    expect(await sessionCookie(page.context())).toBeUndefined();
  });

  test('the plain form signs in and sets a strict, HttpOnly session cookie', async ({ page }) => {
    await page.goto(`${main.url}/ui/`);
    await page.locator('input[name="token"]').fill(main.admin);
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${main.url}/ui/login`),
      page.locator('form[action="/ui/login"] [type="submit"]').click(),
    ]);
    expect(res.status()).toBe(303);
    expect(res.headers()['location']).toBe('/ui/');
    const cookie = await sessionCookie(page.context());
    expect(cookie).toBeDefined();
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Strict');
    expect(cookie.path).toBe('/');
    expect(cookie.expires).toBeGreaterThan(Date.now() / 1000 + 60);
    // The token itself is never the cookie, and never in the address.
    expect(cookie.value).not.toContain(main.admin);
    expect(page.url()).not.toContain(main.admin);
  });
});

test('with JavaScript the app opens on the overview, as an admin', async ({ page }) => {
  await signIn(page, main);
  const session = await (await page.request.get(`${main.url}/ui/session`)).json();
  expect(session.role).toBe('admin');
  expect(session.csrf).toBeTruthy();
  await expect(page.getByTestId('scope-bar').first()).toBeVisible();
  for (const nav of ['overview', 'queue', 'nodes', 'policy', 'schedules', 'backups']) {
    await expect(page.getByTestId(`nav-${nav}`)).toBeVisible();
  }
});

test('a one-time sign-in code works once', async ({ browser }) => {
  const { code } = await api(main, '/v1/ui/codes', { method: 'POST' });
  const first = await browser.newPage();
  await signIn(first, main, code);
  const session = await (await first.request.get(`${main.url}/ui/session`)).json();
  expect(session.role).toBe('admin');
  await first.close();
  // The same code again: refused, with the error on the page.
  const again = await browser.newPage();
  await again.goto(`${main.url}/ui/`);
  await again.locator('input[name="token"]').fill(code);
  const [res] = await Promise.all([
    again.waitForResponse((r) => r.url() === `${main.url}/ui/login`),
    again.locator('form[action="/ui/login"] [type="submit"]').click(),
  ]);
  expect(res.status()).toBe(401);
  await expect(again.locator('#login-error')).toBeVisible();
  await again.close();
});
