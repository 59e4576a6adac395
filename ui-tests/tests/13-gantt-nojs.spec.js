// The overview's forecast card (GET /v1/forecast/gantt, the simulator's SVG writer) and
// sign-in/sign-out with JavaScript off (the sign-out form's CSRF token is rendered by the
// server).
import { test, expect } from '@playwright/test';
import { join } from 'node:path';
import { env, signIn, open, screensDir, activeJobs } from './lib.js';

const main = env.main;

test('the overview shows the forecast picture, naming the running jobs', async ({ page }) => {
  await signIn(page, main);
  await open(page, main, 'overview');
  const img = page.getByTestId('forecast-gantt');
  await expect(img).toHaveAttribute('src', /\/v1\/forecast\/gantt\?hours=6&at=\d+/);
  await expect.poll(() => img.evaluate((e) => e.complete && e.naturalWidth)).toBeGreaterThan(0);
  // The same picture, parsed by the browser's own XML parser.
  const svg = await (await page.request.get(`${main.url}/v1/forecast/gantt?hours=6`)).text();
  const parsed = await page.evaluate((text) => {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    return { error: doc.querySelector('parsererror')?.textContent ?? null, root: doc.documentElement.nodeName };
  }, svg);
  expect(parsed).toEqual({ error: null, root: 'svg' });
  const running = (await activeJobs(main)).filter((j) => j.state === 'running');
  expect(running.length, 'the fixture has running jobs').toBeGreaterThan(0);
  for (const j of running) {
    expect(svg, `job ${j.id}'s tooltip`).toContain(`job ${j.id} (`);
    // And on its bar: an <img> shows no tooltips.
    expect(svg, `job ${j.id}'s bar`).toContain(`>job ${j.id}</text>`);
  }
  // The job waiting for node-c's one slot (held by a job of no known duration) does not
  // start within the 6 hours: a wait band across the picture, named in its own lane.
  expect(svg).toContain(`>job ${main.jobs.node_c_waiting} (waiting)</text>`);
  // The card alone (a full-page shot after scrolling would draw the sticky header over it).
  await page.locator('.card', { has: img }).screenshot({ path: join(screensDir, 'overview-gantt.png') });
});

test('sign in and sign out with JavaScript disabled', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto(`${main.url}/ui/`);
  const login = page.locator('form[action="/ui/login"]');
  await login.locator('input[name="token"]').fill(main.admin);
  await login.locator('[type="submit"]').click();
  const signout = page.locator('form#signout');
  await expect(signout).toBeVisible();
  await expect(signout.locator('input[name="csrf"]')).toHaveValue(/.{16,}/);
  expect((await context.request.get(`${main.url}/ui/session`)).status()).toBe(200);
  await page.getByTestId('signout-button').click();
  await expect(page.locator('form[action="/ui/login"]')).toBeVisible();
  expect((await context.request.get(`${main.url}/ui/session`)).status()).toBe(401);
  await context.close();
});
