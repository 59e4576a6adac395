// `lockgate demo --keep`: the one-time code it printed on stderr signs in (never the admin
// token in a URL), and its dashboard shows the demo's scopes and nodes at the numbers its
// API gives, after its policy change (node-c's rule raised from 0 to 1).
import { test, expect } from '@playwright/test';
import { env, signIn, shot, dataOf, expectBarsMatchApi, expectNodesMatchApi } from './lib.js';

const demo = env.demo;

test("the demo's code signs in and its scopes are at their real counts", async ({ page }) => {
  await signIn(page, demo, demo.code);
  const session = await (await page.request.get(`${demo.url}/ui/session`)).json();
  expect(session.role).toBe('admin');
  await expectBarsMatchApi(page, demo);
  await expectNodesMatchApi(page, demo);
  const cards = Object.fromEntries((await dataOf(page, 'node-card')).map((c) => [c.node, c.slots]));
  expect(cards).toEqual({ 'node-a': '3', 'node-b': '2', 'node-c': '1' });
  const bars = (await dataOf(page, 'scope-bar')).map((b) => b.scope);
  expect(bars).toContain('global');
  await shot(page, 'demo-overview-1280');
});
