// Policy: the editor holds the active policy; an invalid candidate shows the API's error
// at its line; a valid one shows the dry run's diff and the jobs it would admit (the same
// as PUT /v1/policy?dry_run=true answers) and changes nothing until applied; applied, the
// overview shows the new limit. A policy changed behind the page's back is not overwritten
// (If-Match).
import { test, expect } from '@playwright/test';
import { env, api, signIn, shot, expectBarsMatchApi } from './lib.js';

const main = env.main;
const DS1 = '[data-testid="scope-bar"][data-scope="limit:per-datastore[datastore=ds1]"]';

/** The candidate: the editor's text with per-datastore's max raised from 2 to 3. */
function raise(text) {
  if (text.trim().startsWith('{')) {
    const doc = JSON.parse(text);
    doc.limit.find((l) => l.name === 'per-datastore').max = 3;
    return { body: JSON.stringify(doc, null, 2), type: 'application/json' };
  }
  const body = text.replace(/(name\s*=\s*"per-datastore"[\s\S]*?\bmax\s*=\s*)2\b/, '$13');
  if (body === text) throw new Error(`no per-datastore max = 2 in the editor:\n${text}`);
  return { body, type: 'application/toml' };
}

async function preview(page, text) {
  await page.getByTestId('policy-editor').fill(text);
  await page.getByTestId('policy-preview-button').click();
}

test('an invalid candidate shows the error at its line', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-policy').click();
  await expect(page.getByTestId('policy-editor')).toHaveValue(/per-datastore/);
  const bad = '[global]\nmax_running = "x"\n';
  const res = await fetch(`${main.url}/v1/policy?dry_run=true`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${main.admin}`, 'content-type': 'application/toml' },
    body: bad,
  });
  expect(res.status).toBe(422);
  const { error } = await res.json();
  await preview(page, bad);
  await expect(page.getByTestId('policy-error')).toContainText(error.message);
  await expect(page.getByTestId('policy-error')).toContainText('line 2');
});

test('preview the diff, apply it, see the new limit on the overview', async ({ page }) => {
  await signIn(page, main);
  await expect(page.locator(DS1)).toHaveAttribute('data-limit', '2');
  await page.getByTestId('nav-policy').click();
  const editor = page.getByTestId('policy-editor');
  await expect(editor).toHaveValue(/per-datastore/);
  const before = await api(main, '/v1/policy');
  const candidate = raise(await editor.inputValue());
  const dry = await api(main, '/v1/policy?dry_run=true', { method: 'PUT', body: candidate.body, type: candidate.type });
  expect(dry.diff).toEqual(['limit "per-datastore": max 2 -> 3']);
  expect(dry.admitted_now).toEqual([main.jobs.ds1_waiting[0]]);

  await preview(page, candidate.body);
  await expect(page.getByTestId('policy-diff')).toContainText(dry.diff[0]);
  for (const id of dry.admitted_now) await expect(page.getByTestId('policy-admits')).toContainText(String(id));
  // A preview changes nothing.
  expect((await api(main, '/v1/policy')).digest).toBe(before.digest);
  expect((await api(main, `/v1/jobs/${main.jobs.ds1_waiting[0]}`)).state).toBe('queued');

  await page.getByTestId('policy-apply-button').click();
  await expect(async () => expect((await api(main, '/v1/policy')).digest).toBe(dry.digest)).toPass();
  const after = await api(main, '/v1/policy');
  expect(after.policy.limit.find((l) => l.name === 'per-datastore').max).toBe(3);
  await expect(async () =>
    expect((await api(main, `/v1/jobs/${main.jobs.ds1_waiting[0]}`)).state).toBe('running'),
  ).toPass();

  await page.getByTestId('nav-overview').click();
  await expect(page.locator(DS1)).toHaveAttribute('data-limit', '3');
  await expect(page.locator(DS1)).toHaveAttribute('data-running', '3');
  await expectBarsMatchApi(page, main);
});

test('a policy changed since the preview is not overwritten (If-Match)', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-policy').click();
  const editor = page.getByTestId('policy-editor');
  await expect(editor).toHaveValue(/per-datastore/);
  const text = await editor.inputValue();
  const mine = text.replace(/(\[global\][^[]*?\bmax_running\s*=\s*)8\b/, '$17');
  expect(mine).not.toBe(text);
  await preview(page, mine);
  await expect(page.getByTestId('policy-diff')).toContainText('max_running');
  // Someone else changes the policy meanwhile.
  const theirs = text.replace(/(\[global\][^[]*?\bmax_running\s*=\s*)8\b/, '$19');
  const applied = await api(main, '/v1/policy', { method: 'PUT', body: theirs, type: 'application/toml' });
  await page.getByTestId('policy-apply-button').click();
  await expect(page.getByTestId('policy-error')).toBeVisible();
  const now = await api(main, '/v1/policy');
  expect(now.digest).toBe(applied.digest);
  expect(now.policy.global.max_running).toBe(9);
});

test('a limit lowered below its use marks the scope over its limit', async ({ page }) => {
  await signIn(page, main);
  const before = await api(main, '/v1/policy');
  const doc = structuredClone(before.policy);
  doc.limit.find((l) => l.name === 'per-datastore').max = 1;
  await api(main, '/v1/policy', { method: 'PUT', body: doc });
  try {
    const ds1 = (await api(main, '/v1/ui/overview')).scopes.find((s) => s.scope === 'limit:per-datastore[datastore=ds1]');
    expect(ds1.over_limit).toBe(true);
    const bar = page.locator(DS1);
    await expect(bar).toHaveAttribute('data-limit', '1');
    await expect(bar).toContainText(/over/i);
    await expectBarsMatchApi(page, main);
    await shot(page, 'overview-over-limit-1280');
  } finally {
    await api(main, '/v1/policy', { method: 'PUT', body: before.policy });
  }
  await expect(page.locator(DS1)).not.toContainText(/over/i);
});
