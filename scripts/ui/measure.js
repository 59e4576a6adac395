// Times the dashboard (overview, queue paging; 5 runs each and their medians) and takes
// screenshots: scripts/ui/load runs it.
const { chromium } = require('playwright');
(async () => {
  const [url, token, out] = process.argv.slice(2);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  for (const [w, hgt] of [[1280, 800], [390, 844]]) {
    const page = await browser.newPage({ viewport: { width: w, height: hgt } });
    page.on('pageerror', e => console.log('pageerror:', e.message));
    await page.goto(url + '/ui/');
    await page.fill('#token', token);
    await page.click('button[type=submit]');
    await page.waitForSelector('[data-testid=nav-overview]');
    const runs = { overview: [], queue: [], walk: [] };
    for (const run of [1, 2, 3, 4, 5]) {
      let t = Date.now();
      await page.goto(url + '/ui/#/overview'); await page.reload();
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=node-card]').length === 200 && document.querySelectorAll('[data-testid=scope-bar]').length > 0);
      const ov = Date.now() - t;
      t = Date.now();
      await page.goto(url + '/ui/#/queue');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=queue-row]').length === 50);
      const q = Date.now() - t;
      t = Date.now();
      let pages = 1;
      while (!(await page.$eval('[data-testid=page-next]', b => b.disabled))) { await page.click('[data-testid=page-next]'); pages++; }
      const walk = Date.now() - t;
      console.log(`${w}px run ${run}: overview ${ov} ms, queue ${q} ms, ${pages} pages walked in ${walk} ms`);
      runs.overview.push(ov); runs.queue.push(q); runs.walk.push(walk);
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`${w}px medians of 5: overview ${median(runs.overview)} ms, queue ${median(runs.queue)} ms, walking the queue ${median(runs.walk)} ms`);
    await page.goto(url + '/ui/#/overview'); await page.waitForTimeout(2500);
    await page.screenshot({ path: `${out}/load-overview-${w}.png`, fullPage: false });
    await page.goto(url + '/ui/#/queue'); await page.waitForTimeout(2000);
    await page.screenshot({ path: `${out}/load-queue-${w}.png` });
    await page.goto(url + '/ui/#/nodes'); await page.waitForTimeout(2000);
    await page.screenshot({ path: `${out}/load-nodes-${w}.png` });
    const id = await page.evaluate(async () => (await (await fetch('/v1/jobs?state=queued&limit=1')).json()).jobs[0].id);
    await page.goto(url + '/ui/#/jobs/' + id); await page.waitForSelector('[data-testid=job-explain]');
    await page.waitForTimeout(500);
    await page.screenshot({ path: `${out}/load-job-${w}.png`, fullPage: true });
    await page.goto(url + '/ui/#/policy'); await page.waitForTimeout(1000);
    await page.fill('[data-testid=policy-editor]', (await page.inputValue('[data-testid=policy-editor]')).replace('max_running = 20', 'max_running = 30'));
    await page.click('[data-testid=policy-preview-button]'); await page.waitForSelector('[data-testid=policy-diff]');
    await page.screenshot({ path: `${out}/load-policy-${w}.png`, fullPage: true });
    await page.fill('[data-testid=policy-editor]', 'nonsense = [');
    await page.click('[data-testid=policy-preview-button]'); await page.waitForSelector('[data-testid=policy-error]');
    await page.screenshot({ path: `${out}/load-policy-error-${w}.png`, fullPage: true });
    await page.close();
  }
  await browser.close();
})();
