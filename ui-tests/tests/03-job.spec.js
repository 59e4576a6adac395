// The queue at the API's states, its filters, and a waiting job's page: the limit that
// holds it with its numbers, as GET /v1/jobs/ID/explain says it.
import { test, expect } from '@playwright/test';
import { env, api, activeJobs, signIn, dataOf, setFilter, expectExplainMatchesApi } from './lib.js';

const main = env.main;

test('the queue lists every active job in its state', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-queue').click();
  await expect(page).toHaveURL(/#\/queue/);
  await expect(async () => {
    const jobs = await activeJobs(main);
    const rows = await dataOf(page, 'queue-row');
    const shown = Object.fromEntries(rows.map((r) => [r.job, r.state]));
    expect(shown).toEqual(Object.fromEntries(jobs.map((j) => [String(j.id), j.state])));
  }).toPass({ timeout: 10_000 });
});

test('the queue filters by state, kind, owner, node and attribute', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-queue').click();
  await setFilter(page, 'filter-state', 'queued');
  const ids = (rows) => rows.map((r) => Number(r.job)).sort((a, b) => a - b);
  const queued = (await activeJobs(main)).filter((j) => j.state === 'queued').map((j) => j.id);
  await expect(async () => expect(ids(await dataOf(page, 'queue-row'))).toEqual(queued)).toPass();
  await setFilter(page, 'filter-state', 'active');
  await setFilter(page, 'filter-owner', 'alice');
  await expect(async () => {
    const rows = await dataOf(page, 'queue-row');
    expect(rows.length).toBe(1);
    expect(rows[0].state).toBe('running');
  }).toPass();
  await setFilter(page, 'filter-owner', '');
  // The one two-stage upload, held in its prepare step.
  await setFilter(page, 'filter-kind', 'upload');
  await expect(async () => expect(await dataOf(page, 'queue-row')).toEqual([
    expect.objectContaining({ job: String(main.jobs.preparing), state: 'preparing' }),
  ])).toPass();
  await setFilter(page, 'filter-kind', '');
  // node-c: the job on its one slot and the one waiting for it.
  await setFilter(page, 'filter-node', 'node-c');
  const nodeC = [main.jobs.node_c_running, main.jobs.node_c_waiting].sort((a, b) => a - b);
  await expect(async () => expect(ids(await dataOf(page, 'queue-row'))).toEqual(nodeC)).toPass();
  await setFilter(page, 'filter-node', '');
  await setFilter(page, 'filter-attr', 'datastore=ds1');
  const ds1 = [...main.jobs.ds1_running, ...main.jobs.ds1_waiting].sort((a, b) => a - b);
  await expect(async () => expect(ids(await dataOf(page, 'queue-row'))).toEqual(ds1)).toPass();
});

test('a waiting job names the limit that holds it, with its numbers', async ({ page }) => {
  const id = main.jobs.ds1_waiting[0];
  await signIn(page, main);
  await page.getByTestId('nav-queue').click();
  const row = page.locator(`[data-testid="queue-row"][data-job="${id}"]`);
  await expect(row).toHaveAttribute('data-state', 'queued');
  await row.locator('a').first().click();
  await expect(page).toHaveURL(new RegExp(`#/jobs/${id}$`));
  const explain = await expectExplainMatchesApi(page, main, id);
  expect(explain.reasons.map((r) => r.scope)).toEqual(['limit:per-datastore[datastore=ds1]']);
  await expect(page.getByTestId('job-explain')).toContainText('limit:per-datastore[datastore=ds1]');
  await expect(page.getByTestId('job-explain')).toContainText('2/2');
  await expect(page.getByTestId('job-timeline')).toContainText(/submitted/i);
  await expect(page.getByTestId('job-estimate')).toBeVisible();
});

test('the queue sorts by a column header', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-queue').click();
  const alice = (await api(main, '/v1/jobs?owner=alice&active=true')).jobs[0].id;
  const header = page.locator('[data-sort="owner"]');
  await header.click();
  await header.click();
  // Owners descending: alice's job before admin's.
  await expect(page.getByTestId('queue-row').first()).toHaveAttribute('data-job', String(alice));
  await header.click();
  await expect(page.getByTestId('queue-row').first()).not.toHaveAttribute('data-job', String(alice));
});

test('the keyboard reaches the queue and opens a job', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-overview').focus();
  await page.keyboard.press('Tab');
  await expect(page.getByTestId('nav-queue')).toBeFocused();
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(/#\/queue/);
  const id = main.jobs.ds1_waiting[1];
  const link = page.locator(`[data-testid="queue-row"][data-job="${id}"] a`).first();
  await link.focus();
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(new RegExp(`#/jobs/${id}$`));
  await expect(page.getByTestId('job-explain')).toBeVisible();
});
