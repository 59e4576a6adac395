// Screenshots of every page into target/ui-screens/ (1280x800, and the overview and the
// queue at a phone's 390x844), each taken once the page shows its data. They are looked
// at by people; the test asserts that nothing spills out sideways (no horizontal scroll)
// and that the page's text is not too small to read.
import { test, expect } from '@playwright/test';
import { env, signIn, shot } from './lib.js';

const main = env.main;

/** The page, once its data is there: the route, what to wait for, the text it must show. */
const pages = [
  ['overview', 'overview', 'scope-bar', 'per-datastore'],
  ['queue', 'queue', 'queue-row', 'alice'],
  ['job', `jobs/${main.jobs.ds1_waiting[1]}`, 'job-explain', 'limit:per-datastore[datastore=ds1]'],
  ['nodes', 'nodes', 'node-card', 'role=database'],
  // The fixture's two schedules and its finished backup.
  ['schedules', 'schedules', 'nav-schedules', 'nightly-ds1'],
  ['backups', 'backups', 'nav-backups', 'shop'],
];

/** The overview's history cards have their charts (not "Loading history…"), and its
 * forecast picture has loaded; on any other page, nothing to wait for. */
async function historyLoaded(page) {
  await expect(page.getByText('Loading history…')).toHaveCount(0);
  const gantt = page.getByTestId('forecast-gantt');
  if (await gantt.count()) {
    await expect.poll(() => gantt.evaluate((e) => e.complete && e.naturalWidth)).toBeGreaterThan(0);
  }
}

async function expectReadable(page, name) {
  const { scroll, width, tiny } = await page.evaluate(() => {
    const tiny = [...document.querySelectorAll('body *')]
      .filter((e) => e.childNodes.length && [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))
      .filter((e) => e.getClientRects().length && parseFloat(getComputedStyle(e).fontSize) < 11)
      .map((e) => `${e.tagName}.${e.className}: ${e.textContent.trim().slice(0, 40)}`);
    return { scroll: document.documentElement.scrollWidth, width: window.innerWidth, tiny };
  });
  expect(scroll, `${name}: the page is wider than the window`).toBeLessThanOrEqual(width);
  expect(tiny, `${name}: text under 11px`).toEqual([]);
}

test('every page at 1280x800', async ({ page }) => {
  // Nothing is loaded from anywhere but the server itself (no CDN, no font service).
  const outside = [];
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(`${main.url}/`) && !u.startsWith('data:') && u !== 'about:blank') outside.push(u);
  });
  await page.goto(`${main.url}/ui/`);
  await expect(page.locator('form[action="/ui/login"]')).toBeVisible();
  await shot(page, 'signin-1280');
  await signIn(page, main);
  for (const [name, route, ready, text] of pages) {
    await page.goto(`${main.url}/ui/#/${route}`);
    await expect(page.getByTestId(ready).first()).toBeVisible();
    await expect(page.locator('main, body').first()).toContainText(text);
    await page.waitForLoadState('networkidle').catch(() => {});
    await historyLoaded(page);
    await expectReadable(page, name);
    await shot(page, `${name}-1280`);
  }
  // The policy page with a candidate's diff previewed (not applied).
  await page.goto(`${main.url}/ui/#/policy`);
  const editor = page.getByTestId('policy-editor');
  await expect(editor).toHaveValue(/per-datastore/);
  const text = await editor.inputValue();
  await editor.fill(text.replace(/(\[nodes\][^[]*?\bmax_running\s*=\s*)2\b/, '$14'));
  await page.getByTestId('policy-preview-button').click();
  await expect(page.getByTestId('policy-diff')).toContainText('max_running');
  await expectReadable(page, 'policy');
  await shot(page, 'policy-1280');
  expect(outside).toEqual([]);
});

test.describe('at a phone width', () => {
  test.use({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });

  test('the overview and the queue at 390x844', async ({ page }) => {
    await signIn(page, main);
    await page.goto(`${main.url}/ui/#/overview`);
    await expect(page.getByTestId('scope-bar').first()).toBeVisible();
    await historyLoaded(page);
    await expectReadable(page, 'overview (phone)');
    await shot(page, 'overview-390');
    await page.goto(`${main.url}/ui/#/queue`);
    await expect(page.getByTestId('queue-row').first()).toBeVisible();
    await expectReadable(page, 'queue (phone)');
    await shot(page, 'queue-390');
  });
});
