// E2B's SDK, unmodified, against warmdesk. Only the environment changes:
//   E2B_API_URL=http://HOST:PORT/e2b E2B_SANDBOX_URL=http://HOST:PORT/e2b
//   E2B_API_KEY=e2b_<hostd's token>
// TEMPLATE names the snapshot (or an --e2b-template id) to create from.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, FileNotFoundError, TimeoutError } from 'e2b'
import { e2b as computeE2B } from '@computesdk/e2b'

const template = 'base'

// until polls a condition every 100 ms, up to a deadline.
async function until(what, cond, ms = 20000) {
  const end = Date.now() + ms
  for (;;) {
    if (await cond()) return
    if (Date.now() > end) throw new Error('timed out waiting for ' + what)
    await new Promise(r => setTimeout(r, 100))
  }
}

test('two sandboxes at once, commands, files, lifecycle', async () => {
  const t0 = Date.now()
  const [a, b] = await Promise.all([
    Sandbox.create(template, { metadata: { suite: 'e2b-example' }, envs: { GREETING: 'hello' } }),
    Sandbox.create(template, { metadata: { suite: 'e2b-example' } }),
  ])
  console.log(JSON.stringify({ step: 'create two', ms: Date.now() - t0 }))
  try {
    assert.notEqual(a.sandboxId, b.sandboxId)

    // The create's envs reach every command; stdout and stderr apart.
    const r = await a.commands.run('echo "$GREETING"; echo oops >&2')
    assert.equal(r.stdout, 'hello\n')
    assert.equal(r.stderr, 'oops\n')
    assert.equal(r.exitCode, 0)
    assert.equal((await b.commands.run('echo "[$GREETING]"')).stdout, '[]\n')

    // Output arrives while the command runs, not only at its end.
    const t1 = Date.now()
    const chunks = []
    const streamed = await a.commands.run('for i in 1 2 3 4; do echo tick $i; sleep 0.5; done', {
      onStdout: d => chunks.push({ at: Date.now() - t1, d }),
    })
    const total = Date.now() - t1
    assert.equal(streamed.stdout, 'tick 1\ntick 2\ntick 3\ntick 4\n')
    assert.ok(chunks.length >= 2, 'output came in one piece: ' + JSON.stringify(chunks))
    assert.ok(chunks[0].at < total - 1000, `the first chunk came at ${chunks[0].at} ms of ${total}`)

    // A failing command is CommandExitError with its code.
    await assert.rejects(a.commands.run('echo bad >&2; exit 3'), e => e instanceof CommandExitError && e.exitCode === 3 && e.stderr === 'bad\n')

    // A command past its timeout is killed, and the SDK says so.
    await assert.rejects(a.commands.run('sleep 30', { timeoutMs: 1000 }), e => e instanceof TimeoutError)

    // A background command outlives the client that started it, is
    // listed, reached by pid, and killed by pid.
    const bg = await a.commands.run('echo started; sleep 600', { background: true })
    await bg.disconnect()
    await until('the background command to be listed', async () => (await a.commands.list()).some(p => p.pid === bg.pid))
    assert.equal((await a.commands.run(`kill -0 ${bg.pid} && echo alive`)).stdout, 'alive\n')
    assert.equal(await a.commands.kill(bg.pid), true)
    await until('the killed command to leave the list', async () => !(await a.commands.list()).some(p => p.pid === bg.pid))
    assert.equal(await a.commands.kill(bg.pid), false)

    // Files: write (making directories), read back, list, stat, move, remove.
    const text = 'héllo, wörld 🙂\n'
    const w = await a.files.write('/tmp/e2b/in/notes.txt', text)
    assert.equal(w.path, '/tmp/e2b/in/notes.txt')
    assert.equal(await a.files.read('/tmp/e2b/in/notes.txt'), text)
    const bytes = new Uint8Array(70000).map((_, i) => (i * 7) & 255)
    await a.files.write([{ path: '/tmp/e2b/bin.dat', data: bytes.buffer }, { path: '/tmp/e2b/two.txt', data: 'two' }])
    assert.deepEqual(new Uint8Array(await a.files.read('/tmp/e2b/bin.dat', { format: 'bytes' })), bytes)
    const listed = await a.files.list('/tmp/e2b')
    assert.deepEqual(listed.map(e => `${e.name}:${e.type}`).sort(), ['bin.dat:file', 'in:dir', 'two.txt:file'])
    assert.equal((await a.files.getInfo('/tmp/e2b/bin.dat')).size, 70000)
    assert.equal(await a.files.exists('/tmp/e2b/none'), false)
    assert.equal(await a.files.makeDir('/tmp/e2b/made'), true)
    assert.equal(await a.files.makeDir('/tmp/e2b/made'), false)
    await a.files.rename('/tmp/e2b/two.txt', '/tmp/e2b/made/2.txt')
    assert.equal(await a.files.read('/tmp/e2b/made/2.txt'), 'two')
    await a.files.remove('/tmp/e2b/made')
    await assert.rejects(a.files.read('/tmp/e2b/made/2.txt'), FileNotFoundError)
    // Sandboxes do not share files.
    assert.equal(await b.files.exists('/tmp/e2b/bin.dat'), false)

    // Timeout, info, list by metadata.
    await a.setTimeout(10 * 60 * 1000)
    const info = await a.getInfo()
    assert.equal(info.state, 'running')
    assert.equal(info.metadata.suite, 'e2b-example')
    assert.ok(Math.abs(new Date(info.endAt) - Date.now() - 600000) < 60000, 'endAt ' + info.endAt)
    const page = await Sandbox.list({ query: { metadata: { suite: 'e2b-example' } } }).nextItems()
    assert.deepEqual(page.map(s => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())

    // Pause keeps the sandbox's state; connect brings it back.
    assert.equal(await a.pause(), true)
    assert.equal((await a.getInfo()).state, 'paused')
    const back = await Sandbox.connect(a.sandboxId)
    assert.equal(await back.files.read('/tmp/e2b/in/notes.txt'), text)
  } finally {
    assert.equal(await a.kill(), true)
    assert.equal(await b.kill(), true)
  }
  assert.equal(await Sandbox.connect(a.sandboxId).then(() => 'connected', e => e.constructor.name), 'SandboxNotFoundError')
})

test('ComputeSDK through its E2B provider', async () => {
  const provider = computeE2B({})
  const sbx = await provider.sandbox.create({ templateId: template, timeout: 120000 })
  try {
    // ComputeSDK puts env as assignments before the command (X=hi cmd).
    const r = await sbx.runCommand('printenv X', { env: { X: 'hi' }, cwd: '/tmp' })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hi\n')
  } finally {
    await provider.sandbox.destroy(sbx.sandboxId)
  }
  await assert.rejects(Sandbox.connect(sbx.sandboxId))
})
