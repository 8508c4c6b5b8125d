// The MCP TypeScript SDK's own client, unmodified, against hostd's /mcp
// (streamable HTTP): the tools it lists, a desktop created, a click, text
// typed into its xterm and read back, a screenshot, its window listed, the
// desktop deleted.
//   WARMDESK_URL=http://127.0.0.1:8787 WARMDESK_TOKEN=$(cat /var/lib/warmdesk/token) npm test
// (WARMDESK_SNAPSHOT names the snapshot to create from; default minimal.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const url = new URL('/mcp?display=1024x640', process.env.WARMDESK_URL)
const headers = { Authorization: 'Bearer ' + process.env.WARMDESK_TOKEN }

test('the TypeScript SDK lists the tools, creates a desktop, clicks, types and sees it', async () => {
  const client = new Client({ name: 'warmdesk-example', version: '0' })
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }))
  try {
    const { tools } = await client.listTools()
    const names = tools.map(t => t.name).sort()
    for (const want of ['computer', 'create_desktop', 'delete_desktop', 'exec', 'list_desktops', 'read_file', 'reset_desktop', 'windows', 'write_file']) {
      assert.ok(names.includes(want), `no ${want} in ${names}`)
    }
    const computer = tools.find(t => t.name === 'computer')
    assert.equal(computer.inputSchema.type, 'object')
    assert.ok(computer.inputSchema.properties.action, 'computer takes an action')

    const snapshot = process.env.WARMDESK_SNAPSHOT || 'minimal'
    const created = await client.callTool({ name: 'create_desktop', arguments: { snapshot } })
    assert.ok(!created.isError, JSON.stringify(created.content))
    const id = created.structuredContent.id
    assert.match(id, /^d-/)
    assert.equal(created.structuredContent.snapshot, snapshot)
    try {
      // The session's desktop from here on: no desktop_id.
      const shot = await client.callTool({ name: 'computer', arguments: { action: 'screenshot' } })
      assert.ok(!shot.isError, JSON.stringify(shot.content))
      const png = Buffer.from(shot.content.find(c => c.type === 'image').data, 'base64')
      assert.equal(png.subarray(1, 4).toString(), 'PNG')
      assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [1024, 640], 'the size /mcp?display= asked for')

      // The xterm fills the middle of the screen: a click there focuses it.
      for (const args of [
        { action: 'left_click', coordinate: [320, 240] },
        { action: 'type', text: 'echo naïve café > /tmp/from-mcp.txt' },
        { action: 'key', text: 'Return' },
      ]) {
        const res = await client.callTool({ name: 'computer', arguments: args })
        assert.ok(!res.isError, `${args.action}: ${JSON.stringify(res.content.filter(c => c.type === 'text'))}`)
        assert.ok(res.content.some(c => c.type === 'image'), `${args.action} answers a screenshot`)
      }
      // The xterm's shell writes the file a moment after the key's
      // screenshot settles: the guest waits for it, within 10 s.
      const read = await client.callTool({ name: 'exec', arguments: {
        command: "timeout 10 sh -c 'until [ -s /tmp/from-mcp.txt ]; do sleep 0.1; done'; cat /tmp/from-mcp.txt" } })
      assert.ok(!read.isError, JSON.stringify(read.content))
      const text = read.structuredContent.stdout
      assert.equal(text, 'naïve café\n')

      // Its window, in the same 1024x640 coordinates.
      const wins = await client.callTool({ name: 'windows', arguments: { action: 'list' } })
      assert.ok(!wins.isError, JSON.stringify(wins.content))
      const term = wins.structuredContent.windows.find(w => w.class === 'XTerm')
      assert.ok(term && term.focused, JSON.stringify(wins.structuredContent))
      assert.ok(term.x >= 0 && term.x + term.width <= 1024 && term.y + term.height <= 640, JSON.stringify(term))

      const other = await client.callTool({ name: 'computer', arguments: { action: 'left_click', coordinate: [2000, 10] } })
      assert.ok(other.isError, 'a click off the 1024x640 display is a tool error')
    } finally {
      const gone = await client.callTool({ name: 'delete_desktop', arguments: { desktop_id: id } })
      assert.ok(!gone.isError, JSON.stringify(gone.content))
    }
  } finally {
    await client.close()
  }
})
