// Schedules and backups at the API's values: each schedule's card shows its expression and
// its next planned time (the `<time datetime>` is the API's `next`); each backup's row its
// phase and its block and item progress.
import { test, expect } from '@playwright/test';
import { env, api, signIn } from './lib.js';

const main = env.main;

test('schedules show their next planned time, backups their phase and progress', async ({ page }) => {
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
});
