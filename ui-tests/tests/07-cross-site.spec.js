// Cross-site form posts: while an admin is signed in, pages from another site
// (attacker.test, mapped to 127.0.0.1 in the browser) and from another origin of the same
// site (127.0.0.1 on another port) auto-submit forms to the server. Every one is refused
// (401: the strict cookie is not sent cross-site; 403: the Origin is not the server) and
// nothing changes: the node stays uncordoned, no job is submitted, the session lives on.
import { test, expect } from '@playwright/test';
import { createServer } from 'node:http';
import { env, api, signIn } from './lib.js';

const main = env.main;
let attacker;
let port;

/** Serves /NAME as a page that auto-submits one form to the lockgate server. */
const forms = {
  cordon: `<form method="post" action="${main.url}/v1/nodes/node-a/cordon"></form>`,
  // A JSON body smuggled in a text/plain form: {"kind":"backup","x":"="}
  submit: `<form method="post" enctype="text/plain" action="${main.url}/v1/jobs">
             <input name='{"kind":"backup","x":"' value='"}'></form>`,
  logout: `<form method="post" action="${main.url}/ui/logout"><input name="csrf" value=""></form>`,
  code: `<form method="post" action="${main.url}/v1/ui/codes"></form>`,
};

test.beforeAll(async () => {
  attacker = createServer((req, res) => {
    const form = forms[req.url.slice(1)];
    res.writeHead(form ? 200 : 404, { 'content-type': 'text/html' });
    res.end(`<!doctype html><title>free prizes</title><body>${form ?? ''}
      <script>document.forms[0] && document.forms[0].submit()</script></body>`);
  });
  await new Promise((ok) => attacker.listen(0, '127.0.0.1', ok));
  port = attacker.address().port;
});

test.afterAll(() => attacker?.close());

for (const origin of ['attacker.test', '127.0.0.1']) {
  test(`form posts from ${origin} are refused and change nothing`, async ({ page }) => {
    await signIn(page, main);
    const jobs = (await api(main, '/v1/jobs?limit=1000')).jobs.length;
    for (const name of Object.keys(forms)) {
      const [res] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'POST' && r.url().startsWith(main.url)),
        page.goto(`http://${origin}:${port}/${name}`),
      ]);
      // A logout without the session's CSRF token may answer anything: what counts is
      // that the session lives on (checked below and after every form).
      if (name !== 'logout') {
        expect([401, 403], `${name} from ${origin}: ${res.status()}`).toContain(res.status());
      }
      expect((await page.request.get(`${main.url}/ui/session`)).status(), `after ${name}`).toBe(200);
    }
    expect((await api(main, '/v1/nodes')).nodes.find((n) => n.name === 'node-a').cordoned).toBe(false);
    expect((await api(main, '/v1/jobs?limit=1000')).jobs.length).toBe(jobs);
    // The session was not signed out by the forged logout.
    expect((await page.request.get(`${main.url}/ui/session`)).status()).toBe(200);
    await page.goto(`${main.url}/ui/`);
    await expect(page.getByTestId('nav-overview')).toBeVisible();
  });
}
