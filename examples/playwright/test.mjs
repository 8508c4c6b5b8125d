// Two browser test cases, each on a fresh warmdesk desktop, driven by
// Playwright over DevTools: the desktop's own Chromium, which a person can
// watch in the viewer while the test runs.
//
//   HOSTD_URL    hostd's API (default http://127.0.0.1:8787)
//   HOSTD_TOKEN  a token that may create desktops (the daemon's)
//   APP_URL      the page under test as the guest reaches it; a server on
//                the host's loopback port P is http://host:P/ from the
//                guest once the desktop's network allows host:P
//   SNAPSHOT     the snapshot to create from (default browser)
//
// Each case creates its desktop from the snapshot (milliseconds from the
// warm pool) with the network allowing only the app, connects with
// connectOverCDP, and deletes the desktop at the end: every case starts
// from the same clean state. It prints one JSON line per case.
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

async function testCase(name, body) {
  const port = new URL(appURL).port || '80';
  const desktop = await api('POST', '/v1/desktops', {
    snapshot,
    network: { mode: 'allow', allow: [`host:${port}`] },
  });
  const created = performance.now();
  try {
    const browser = await chromium.connectOverCDP(`${base}/v1/desktops/${desktop.id}/cdp`, { headers: auth });
    const connectMs = Math.round(performance.now() - created);
    try {
      const page = await browser.contexts()[0].newPage();
      await body(page);
      console.log(JSON.stringify({ test: name, ok: true, desktop: desktop.id, connect_ms: connectMs }));
    } finally {
      // Disconnects; the desktop's Chromium goes with the desktop.
      await browser.close();
    }
  } finally {
    await api('DELETE', `/v1/desktops/${desktop.id}`);
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

await testCase('greets by name', async (page) => {
  await page.goto(appURL);
  check((await page.evaluate(() => localStorage.getItem('visits'))) === null, 'a fresh desktop has no visits stored');
  await page.fill('#name', 'warmdesk');
  await page.click('#send');
  await page.waitForSelector('#out:has-text("hello, warmdesk")', { timeout: 60000 });
  check((await page.evaluate(() => localStorage.getItem('visits'))) === '1', 'the visit was stored');
});

await testCase('starts clean', async (page) => {
  // The first case stored a visit in its desktop: this one is another
  // desktop from the same snapshot, so nothing of it is left.
  await page.goto(appURL);
  check((await page.evaluate(() => localStorage.getItem('visits'))) === null, 'state leaked from the first case');
  check((await page.inputValue('#name')) === '', 'the form is not empty');
});
