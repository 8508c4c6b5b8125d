// The bench's e2b suite: E2B's @e2b/desktop SDK, unmodified, against a
// hostd's /e2b, beside warmdesk's own API on the same desktops. Each
// sample creates a sandbox (timed to the SDK returning) and a desktop
// through hostd's API, then alternates the SDK's screenshot() and
// leftClick() through the front door with its fast paths (E2B_API_URL),
// the same through one that runs every command in the guest
// (E2B_GUEST_URL), and hostd's own screenshot and click through /actions.
// Loaded from E2B_DIR (examples/e2b). Prints one JSON line per
// measurement: {"what": ..., "ms": ...}, and {"id": ...} as soon as a
// sandbox exists, so the bench can clean up after a failure.
import { createRequire } from 'node:module'

const { E2B_DIR: dir, HOSTD_URL: base, HOSTD_TOKEN: token, E2B_GUEST_URL: guestURL, SNAPSHOT: snapshot, SAMPLES, ROUNDS } = process.env
const { Sandbox } = createRequire(dir + '/')('@e2b/desktop')
const auth = { Authorization: `Bearer ${token}` }
const say = o => console.log(JSON.stringify(o))

async function timed(what, f) {
  const t = performance.now()
  await f()
  say({ what, ms: performance.now() - t })
}

async function api(path, init) {
  const res = await fetch(base + path, { ...init, headers: { ...auth, ...(init?.headers || {}) } })
  const body = Buffer.from(await res.arrayBuffer())
  if (!res.ok) throw new Error(`${path}: ${res.status} ${body}`)
  return body
}

for (let s = 0; s < Number(SAMPLES); s++) {
  let desk
  await timed('create', async () => { desk = await Sandbox.create() })
  say({ id: desk.sandboxId })
  const id = desk.sandboxId
  const inGuest = await Sandbox.connect(id, { apiUrl: guestURL, sandboxUrl: guestURL })
  let own
  await timed('api_create', async () => {
    own = JSON.parse(await api('/v1/desktops', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ snapshot }),
    }))
  })
  say({ id: own.id })
  await api(`/v1/desktops/${own.id}`, { method: 'DELETE' })
  for (let r = 0; r < Number(ROUNDS); r++) {
    const x = 200 + 10 * r, y = 150 + 10 * r
    await timed('sdk_screenshot', () => desk.screenshot())
    await timed('sdk_screenshot_guest', () => inGuest.screenshot())
    await timed('api_screenshot', () => api(`/v1/desktops/${id}/screenshot`))
    await timed('sdk_left_click', () => desk.leftClick(x, y))
    await timed('sdk_left_click_guest', () => inGuest.leftClick(x + 3, y + 3))
    await timed('api_click', () => api(`/v1/desktops/${id}/actions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ actions: [{ action: 'click', x: x + 5, y: y + 5 }] }),
    }))
  }
  await desk.kill()
}
