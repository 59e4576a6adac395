// Playwright for lockgate's dashboard: Debian's Chromium (never a downloaded browser),
// headless, one worker so the spec files run in name order against the servers
// scripts/checks/browser started (their addresses and tokens in $LOCKGATE_UI_ENV).
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './tests',
  workers: 1,
  fullyParallel: false,
  forbidOnly: true,
  retries: 0,
  timeout: 45_000,
  expect: { timeout: 10_000 },
  reporter: [['list']],
  outputDir: process.env.LOCKGATE_UI_RESULTS ?? 'test-results',
  use: {
    browserName: 'chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    screenshot: 'only-on-failure',
    trace: 'off',
    actionTimeout: 10_000,
    navigationTimeout: 15_000,
    launchOptions: {
      executablePath: process.env.LOCKGATE_CHROMIUM ?? '/usr/bin/chromium',
      // attacker.test: a second site on this machine, for the cross-site form posts.
      args: ['--disable-dev-shm-usage', '--host-resolver-rules=MAP attacker.test 127.0.0.1'],
    },
  },
});
