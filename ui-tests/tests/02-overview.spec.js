// The overview shows the scopes and nodes at the API's real numbers, and follows the
// server live (SSE) without a reload.
import { test, expect } from '@playwright/test';
import { env, api, signIn, dataOf, expectBarsMatchApi, expectNodesMatchApi } from './lib.js';

const main = env.main;

test('scopes and nodes at their real counts', async ({ page }) => {
  await signIn(page, main);
  await expectBarsMatchApi(page, main);
  await expectNodesMatchApi(page, main);
  // The fixture's own numbers, so an API and a page that agree on nothing do not pass.
  const bars = Object.fromEntries((await dataOf(page, 'scope-bar')).map((b) => [b.scope, b]));
  const ds1 = bars['limit:per-datastore[datastore=ds1]'];
  expect([ds1.running, ds1.limit]).toEqual(['2', '2']);
  expect(bars['global'].limit).toBe('8');
  expect(Number(bars['global'].preparing)).toBe(1);
  const cards = Object.fromEntries((await dataOf(page, 'node-card')).map((c) => [c.node, c]));
  expect([cards['node-a'].slots, cards['node-b'].slots, cards['node-c'].slots]).toEqual(['3', '2', '1']);
  expect(cards['node-c'].text).toContain('role=database');
});

test('the overview follows the server live, without a reload', async ({ page }) => {
  await signIn(page, main);
  await expect(page.getByTestId('scope-bar').first()).toBeVisible();
  let reloads = 0;
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) reloads += 1;
  });
  const job = await api(main, '/v1/jobs', {
    method: 'POST',
    body: { kind: 'backup', node: 'node-b', executor: 'agent', attrs: { datastore: 'ds5' } },
  });
  const ds5 = page.locator('[data-testid="scope-bar"][data-scope="limit:per-datastore[datastore=ds5]"]');
  await expect(ds5).toHaveAttribute('data-running', '1');
  await expect(page.locator('[data-testid="node-card"][data-node="node-b"]')).toHaveAttribute('data-running', '1');
  await expect(page.getByTestId('event-stream').locator(`a[href$="#/jobs/${job.id}"]`).first()).toBeVisible();
  await api(main, `/v1/jobs/${job.id}/cancel?force=true`, { method: 'POST' });
  await expect(page.locator('[data-testid="node-card"][data-node="node-b"]')).toHaveAttribute('data-running', '0');
  await expectBarsMatchApi(page, main);
  expect(reloads).toBe(0);
});
