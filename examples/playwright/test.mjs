// Two browser test cases on one warmdesk desktop, driven by Playwright over
// DevTools: the desktop's own Chromium, which a person can watch in the
// viewer while the tests run. Between cases the desktop is reset to its
// snapshot (the cost of a warm-pool create), so each case starts from the
// same clean state and the same guest clock.
//
//   HOSTD_URL    hostd's API (default http://127.0.0.1:8787)
//   HOSTD_TOKEN  a token that may create desktops (the daemon's)
//   APP_URL      the page under test as the guest reaches it; a server on
//                the host's loopback port P is http://host:P/ from the
//                guest once the desktop's network allows host:P
//   SNAPSHOT     the snapshot to create from (default browser)
//
// It creates the desktop with the network allowing only the app and the
// guest's clock at 2030-01-02 09:00 UTC, resets it before every case but
// the first, connects with connectOverCDP, and deletes the desktop at the
// end. It prints one JSON line per case.
import { chromium } from 'playwright-core';

const base = process.env.HOSTD_URL || 'http://127.0.0.1:8787';
const token = process.env.HOSTD_TOKEN;
const appURL = process.env.APP_URL;
const snapshot = process.env.SNAPSHOT || 'browser';
if (!token || !appURL) {
  console.error('set HOSTD_TOKEN (the daemon token) and APP_URL (for example http://host:3000/)');
  process.exit(2);
}
const auth = { Authorization: `Bearer ${token}` };

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const clock = '2030-01-02T09:00:00Z';
const port = new URL(appURL).port || '80';
const desktop = await api('POST', '/v1/desktops', {
  snapshot,
  network: { mode: 'allow', allow: [`host:${port}`] },
  clock,
});
let cases = 0;

async function testCase(name, body) {
  let resetMs;
  if (cases++ > 0) {
    const t0 = performance.now();
    await api('POST', `/v1/desktops/${desktop.id}/reset`, {});
    resetMs = Math.round(performance.now() - t0);
  }
  const t1 = performance.now();
  const browser = await chromium.connectOverCDP(`${base}/v1/desktops/${desktop.id}/cdp`, { headers: auth });
  const connectMs = Math.round(performance.now() - t1);
  try {
    const page = await browser.contexts()[0].newPage();
    await body(page);
    console.log(JSON.stringify({ test: name, ok: true, desktop: desktop.id, reset_ms: resetMs, connect_ms: connectMs }));
  } finally {
    // Disconnects; the desktop's Chromium stays for the next case.
    await browser.close();
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

try {
  await testCase('greets by name', async (page) => {
    await page.goto(appURL);
    const year = await page.evaluate(() => new Date().getUTCFullYear());
    check(year === 2030, `the guest's clock says ${year}, want the 2030 the desktop was created with`);
    check((await page.evaluate(() => localStorage.getItem('visits'))) === null, 'a fresh desktop has no visits stored');
    await page.fill('#name', 'warmdesk');
    await page.click('#send');
    await page.waitForSelector('#out:has-text("hello, warmdesk")', { timeout: 60000 });
    check((await page.evaluate(() => localStorage.getItem('visits'))) === '1', 'the visit was stored');
  });

  await testCase('starts clean', async (page) => {
    // The first case stored a visit in the desktop's Chromium; the reset
    // put the desktop back to its snapshot, so nothing of it is left.
    await page.goto(appURL);
    const year = await page.evaluate(() => new Date().getUTCFullYear());
    check(year === 2030, `after the reset the guest's clock says ${year}, want 2030 again`);
    check((await page.evaluate(() => localStorage.getItem('visits'))) === null, 'state leaked from the first case');
    check((await page.inputValue('#name')) === '', 'the form is not empty');
  });
} finally {
  await api('DELETE', `/v1/desktops/${desktop.id}`);
}
