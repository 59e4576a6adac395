// Under load (the second server: 50 nodes, 1,000 queued jobs behind 5 running ones): the
// page's numbers equal the API's, the queue pages through every active job exactly once,
// and the time from navigation to the overview's bars being filled is measured (median of
// 5, written to target/ui-screens/load-timing.json and printed).
import { test, expect } from '@playwright/test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  env, api, activeJobs, signIn, dataOf, shot, screensDir,
  expectBarsMatchApi, expectNodesMatchApi, expectExplainMatchesApi,
} from './lib.js';

const load = env.load;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('the overview and the nodes equal the API under load', async ({ page }) => {
  const active = await activeJobs(load);
  expect(active.filter((j) => j.state === 'queued').length).toBe(load.queued);
  await signIn(page, load);
  await expectBarsMatchApi(page, load);
  await shot(page, 'overview-load-1280');
  await page.getByTestId('nav-nodes').click();
  await expect(page.getByTestId('node-card')).toHaveCount(load.nodes);
  await expectNodesMatchApi(page, load);
  await shot(page, 'nodes-load-1280');
});

test('the queue pages through every active job once', async ({ page }) => {
  const expected = (await activeJobs(load)).map((j) => j.id).sort((a, b) => a - b);
  await signIn(page, load);
  await page.getByTestId('nav-queue').click();
  await expect(page.getByTestId('queue-row').first()).toBeVisible();
  await shot(page, 'queue-load-1280');
  const seen = [];
  let pages = 0;
  for (;;) {
    const rows = await dataOf(page, 'queue-row');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length, 'a page holds a bounded number of rows').toBeLessThanOrEqual(500);
    seen.push(...rows.map((r) => Number(r.job)));
    pages += 1;
    expect(pages, 'more pages than jobs').toBeLessThan(expected.length);
    const next = page.getByTestId('page-next');
    if ((await next.count()) === 0 || (await next.isDisabled())) break;
    const first = rows[0].job;
    await next.click();
    await expect(page.getByTestId('queue-row').first()).not.toHaveAttribute('data-job', first);
  }
  expect(pages).toBeGreaterThan(1);
  expect(seen.length, 'a job shown twice').toBe(new Set(seen).size);
  expect([...seen].sort((a, b) => a - b)).toEqual(expected);
  // And back.
  await page.getByTestId('page-prev').click();
  await expect(page.getByTestId('queue-row').first()).toBeVisible();
});

test('a queued job explains the full global limit', async ({ page }) => {
  const queued = (await api(load, '/v1/jobs?state=queued&limit=1')).jobs[0];
  await signIn(page, load);
  await page.goto(`${load.url}/ui/#/jobs/${queued.id}`);
  const explain = await expectExplainMatchesApi(page, load, queued.id);
  expect(explain.reasons.some((r) => r.scope === 'global' && r.count === 5 && r.limit === 5)).toBe(true);
});

test('page load: navigation to the overview bars filled, median of 5', async ({ page }) => {
  await signIn(page, load);
  const scopes = (await api(load, '/v1/ui/overview')).scopes.length;
  const times = { overview: [], queue: [] };
  for (let i = 0; i < 5; i++) {
    for (const [route, testid, count] of [['overview', 'scope-bar', scopes], ['queue', 'queue-row', 1]]) {
      await page.goto('about:blank');
      await page.goto(`${load.url}/ui/#/${route}`);
      // In the page's own clock: milliseconds since its navigation started.
      const ms = await page.waitForFunction(
        ({ testid, count }) => {
          const els = document.querySelectorAll(`[data-testid="${testid}"]`);
          return els.length >= count && [...els].every((e) => e.dataset.running !== undefined || e.dataset.job)
            ? performance.now()
            : null;
        },
        { testid, count },
        { polling: 'raf', timeout: 20_000 },
      );
      times[route].push(Math.round(await ms.jsonValue()));
    }
  }
  const result = {
    server: 'load: 50 nodes, 1,000 queued jobs, 5 running',
    overview_bars_ms: times.overview,
    overview_median_ms: median(times.overview),
    queue_first_page_ms: times.queue,
    queue_median_ms: median(times.queue),
  };
  writeFileSync(join(screensDir, 'load-timing.json'), JSON.stringify(result, null, 2) + '\n');
  console.log(`page load under load: ${JSON.stringify(result)}`);
  expect(result.overview_median_ms).toBeLessThan(3000);
});
