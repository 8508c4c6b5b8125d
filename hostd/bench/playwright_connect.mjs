// The bench's playwright_connect: one Node process, as a browser test
// suite's worker is, that for each line read on stdin creates a desktop
// through hostd's API and times Playwright's chromium.connectOverCDP on it,
// from the create's answer to the connect resolving. The first sample of
// the process also loads Playwright's connection code (the bench reports it
// apart). playwright-core is loaded from PLAYWRIGHT_DIR (examples/playwright,
// where scripts/setup installs it). Prints {"id": ...} once the create
// answers, then {"id": ..., "connect_ms": ...}; the bench deletes the
// desktop and asks for the next sample.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

const { HOSTD_URL: base, HOSTD_TOKEN: token, SNAPSHOT: snapshot, PLAYWRIGHT_DIR: dir } = process.env;
const { chromium } = createRequire(dir + '/')('playwright-core');
const auth = { Authorization: `Bearer ${token}` };

for await (const _ of createInterface({ input: process.stdin })) {
  const res = await fetch(`${base}/v1/desktops`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ snapshot }),
  });
  const created = performance.now();
  const text = await res.text();
  if (!res.ok) throw new Error(`create: ${res.status} ${text}`);
  const { id } = JSON.parse(text);
  // Printed first, so the bench can delete the desktop if the connect fails.
  console.log(JSON.stringify({ id }));
  const browser = await chromium.connectOverCDP(`${base}/v1/desktops/${id}/cdp`, { headers: auth });
  const connectMs = performance.now() - created;
  await browser.close(); // over CDP: disconnects, the desktop's Chromium runs on
  console.log(JSON.stringify({ id, connect_ms: connectMs }));
}
