// Schedules, backups and restores at the API's values: each schedule's card shows its
// expression and its next planned time (the `<time datetime>` is the API's `next`); each
// backup's row its phase and its block and item progress; each restore's row its backup,
// phase and item counts.
import { test, expect } from '@playwright/test';
import { env, api, signIn } from './lib.js';

const main = env.main;

test('schedules show their next planned time, backups their phase and progress, restores their counts', async ({ page }) => {
  await signIn(page, main);
  await page.getByTestId('nav-schedules').click();
  const { schedules } = await api(main, '/v1/schedules');
  expect(schedules.map((s) => s.name).sort()).toEqual(['nightly-ds1', 'verify-weekly']);
  for (const s of schedules) {
    const card = page.locator(`[data-testid="schedule-card"][data-schedule="${s.name}"]`);
    await expect(card).toContainText(s.when);
    await expect(card.locator(`time[datetime="${s.next}"]`)).toHaveCount(1);
  }
  await expect(page.getByTestId('schedule-card')).toHaveCount(schedules.length);

  await page.getByTestId('nav-backups').click();
  const { backups } = await api(main, '/v1/backups');
  expect(backups.map((b) => b.name)).toEqual(['shop']);
  for (const b of backups) {
    const row = page.locator(`[data-testid="backup-row"][data-backup="${b.name}"]`);
    await expect(row).toContainText(b.phase);
    await expect(row).toContainText(`${b.progress.blocks_done}/${b.progress.blocks_total}`);
    await expect(row).toContainText(`${b.progress.items_done}/${b.progress.items_total}`);
  }
  const { restores } = await api(main, '/v1/restores');
  expect(restores.map((r) => r.name)).toEqual(['shop-copy']);
  for (const r of restores) {
    const row = page.locator(`[data-testid="restore-row"][data-restore="${r.name}"]`);
    await expect(row).toContainText(r.backup);
    await expect(row).toContainText(r.phase);
    await expect(row.locator('td').nth(4)).toHaveText(String(r.items.restored));
  }
});
