// @e2b/desktop, unmodified, against warmdesk's e2b-desktop snapshot
// (examples/recipes/e2b-desktop.yaml, mapped to E2B's template "desktop").
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/desktop'

// warmdesk's own API on the same host, to hold the SDK's answers against:
// the E2B key is e2b_ and hostd's token, its URL hostd's /e2b.
const hostd = process.env.E2B_API_URL.replace(/\/e2b$/, '')
const auth = { Authorization: 'Bearer ' + process.env.E2B_API_KEY.replace(/^e2b_/, '') }
async function own(path, body) {
  const res = await fetch(hostd + path, body === undefined ? { headers: auth }
    : { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
  assert.ok(res.ok, `${path}: ${res.status}`)
  return res.json()
}

test('the desktop SDK drives the screen, mouse and keyboard', async () => {
  const t0 = Date.now()
  const desk = await Sandbox.create()
  console.log(JSON.stringify({ step: 'create', ms: Date.now() - t0 }))
  try {
    const [w, h] = await desk.getScreenSize().then(s => [s.width, s.height])
    const view = await own(`/v1/desktops/${desk.sandboxId}`)
    assert.deepEqual({ width: w, height: h }, view.screen)
    const png = Buffer.from(await desk.screenshot())
    assert.equal(png.subarray(1, 4).toString(), 'PNG')
    assert.equal(png.readUInt32BE(16), w)
    assert.equal(png.readUInt32BE(20), h)

    await desk.moveMouse(200, 150)
    assert.deepEqual(await desk.getCursorPosition(), { x: 200, y: 150 })
    const where = await own(`/v1/desktops/${desk.sandboxId}/actions`, { actions: [{ action: 'cursor_position' }] })
    assert.deepEqual(where.results[0].cursor, { x: 200, y: 150 })
    await desk.leftClick(300, 200)
    assert.deepEqual(await desk.getCursorPosition(), { x: 300, y: 200 })
    await desk.doubleClick(310, 210)
    await desk.rightClick(320, 220)
    await desk.press('esc')
    await desk.middleClick()
    await desk.scroll('down', 2)
    await desk.drag([100, 100], [140, 130])
    assert.deepEqual(await desk.getCursorPosition(), { x: 140, y: 130 })

    // Typing lands in a focused window: an xterm that writes what it
    // reads to a file.
    const term = await desk.commands.run(
      "xterm -T e2b-typing -e sh -c 'read -r line; printf %s \"$line\" > /tmp/typed.txt' >/dev/null 2>&1",
      { background: true })
    let win = ''
    for (let i = 0; i < 100 && !win; i++) {
      win = (await desk.commands.run('xdotool search --onlyvisible --name "^e2b-typing$" || true')).stdout.trim()
      if (!win) await desk.wait(200)
    }
    assert.ok(win, 'the xterm never showed')
    await desk.commands.run(`xdotool windowactivate --sync ${win.split('\n')[0]}`)
    await desk.write('hello, wörld')
    await desk.press('enter')
    await term.wait()
    assert.equal(await desk.files.read('/tmp/typed.txt'), 'hello, wörld')
    assert.equal(await desk.getWindowTitle(win.split('\n')[0]).catch(() => 'gone'), 'gone')

    // The live stream: x11vnc and noVNC in the guest, at the URL the SDK
    // builds from the domain hostd gives (DOMAIN, hostd serve
    // --e2b-domain); serving that name is a proxy's job (docs/E2B.md).
    await desk.stream.start()
    assert.equal(desk.stream.getUrl(), `https://6080-${desk.sandboxId}.${process.env.DOMAIN}/vnc.html?autoconnect=true&resize=scale`)
    assert.match((await desk.commands.run('netstat -tln')).stdout, /:6080 /)
    await desk.stream.stop()
  } finally {
    await desk.kill()
  }
})
