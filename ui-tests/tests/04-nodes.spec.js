// Nodes: the cards at the API's numbers; an admin cordons node-c from its card, the API
// says it is cordoned, and the explain of the job waiting for node-c changes from the full
// node to the cordon, on the job's page; uncordon puts it back.
import { test, expect } from '@playwright/test';
import { env, api, signIn, expectNodesMatchApi, expectExplainMatchesApi } from './lib.js';

const main = env.main;

test('cordon a node and see the waiting job explain change', async ({ page }) => {
  const id = main.jobs.node_c_waiting;
  await signIn(page, main);
  // Before: the job waits for node-c's one slot.
  await page.goto(`${main.url}/ui/#/jobs/${id}`);
  const before = await expectExplainMatchesApi(page, main, id);
  expect(before.reasons.map((r) => [r.scope, r.count, r.limit])).toEqual([['node:node-c', 1, 1]]);
  await expect(page.getByTestId('job-explain')).toContainText('1/1');

  await page.getByTestId('nav-nodes').click();
  await expect(page).toHaveURL(/#\/nodes/);
  await expectNodesMatchApi(page, main);
  const card = page.locator('[data-testid="node-card"][data-node="node-c"]');
  await expect(card).toContainText('role=database');
  await card.getByTestId('cordon-button').click();
  await expect(card.getByTestId('uncordon-button')).toBeVisible();
  const node = (await api(main, '/v1/nodes')).nodes.find((n) => n.name === 'node-c');
  expect(node.cordoned).toBe(true);

  await page.goto(`${main.url}/ui/#/jobs/${id}`);
  const after = await expectExplainMatchesApi(page, main, id);
  expect(after.text).toMatch(/cordoned/);
  await expect(page.getByTestId('job-explain')).toContainText('cordoned');

  await page.getByTestId('nav-nodes').click();
  await card.getByTestId('uncordon-button').click();
  await expect(card.getByTestId('cordon-button')).toBeVisible();
  expect((await api(main, '/v1/nodes')).nodes.find((n) => n.name === 'node-c').cordoned).toBe(false);
  await page.goto(`${main.url}/ui/#/jobs/${id}`);
  await expect(page.getByTestId('job-explain')).toContainText('1/1');
});
