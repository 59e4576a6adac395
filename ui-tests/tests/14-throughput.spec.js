// Throughput over time: a job that writes 1 MiB every 0.2 s (measured by `lockgate run`
// from the kernel) shows as a line on the overview's per-scope chart and on the nodes
// page's chart of its node, whose label gives the same rates as the API's history.
import { test, expect } from '@playwright/test';
import { env, api, signIn, shot } from './lib.js';

const rates = env.rates;

test('a writing job draws its datastore and its node over time', async ({ page }) => {
  const tp = await api(rates, '/v1/ui/throughput');
  const scope = tp.scopes.find((x) => x.name === 'limit:per-datastore[datastore=ds9]');
  expect(scope, JSON.stringify(tp)).toBeDefined();
  // About 5 MiB/s; at least 1 MiB/s on a loaded machine.
  expect(Math.max(...scope.bytes_per_s.filter((v) => v != null))).toBeGreaterThan(1 << 20);
  expect(tp.nodes.map((n) => n.name)).toContain('n-w');

  await signIn(page, rates);
  // One chart per scope the job holds (its datastore's, its node's...).
  const chart = page.locator('[data-testid="throughput"] svg[aria-label^="limit:per-datastore[datastore=ds9]:"]');
  await expect(chart).toHaveCount(1);
  const label = await chart.getAttribute('aria-label');
  expect(label).toMatch(/^limit:per-datastore\[datastore=ds9\]: [0-9.]+ (B|KiB|MiB|GiB)\/s at the last sample/);
  // A line is drawn: its path has at least a start.
  expect(await chart.locator('path.rate').getAttribute('d')).toMatch(/^M /);

  await page.getByTestId('nav-nodes').click();
  const node = page.locator('[data-testid="node-throughput"] svg[aria-label^="n-w:"]');
  await expect(node).toHaveCount(1);
  await expect(node).toHaveAttribute('aria-label', /^n-w: .*\/s at the last sample.*memory pressure at most/);
  await expect(node.locator('path.pressure.memory')).toHaveCount(1);
  await shot(page, 'nodes-throughput');
});
