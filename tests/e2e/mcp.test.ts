// The MCP server driven by the MCP SDK's own client over stdio (`forkbox mcp`): the tool list is
// small, code runs, text and a plot come back.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { useTestHost } from './harness.ts'

const host = useTestHost()

describe('mcp', () => {
  it('lists short tools, runs code with state, returns a plot as an image, kills the sandbox', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [new URL('../../apps/cli/bin/forkbox.mjs', import.meta.url).pathname, 'mcp'],
      env: {
        ...(process.env as Record<string, string>),
        FORKBOX_URL: host().conn.url,
        FORKBOX_API_KEY: host().conn.apiKey,
      },
      stderr: 'inherit',
    })
    const client = new Client({ name: 'forkbox-test', version: '1.0.0' })
    await client.connect(transport)
    try {
      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((t) => t.name).sort(), [
        'create_sandbox',
        'fork_sandbox',
        'kill_sandbox',
        'list_files',
        'read_file',
        'run_code',
        'run_command',
        'write_file',
      ])
      // about 4 characters a token: the whole list stays well under 1,000 tokens
      const size = JSON.stringify(tools).length
      assert.ok(size / 4 < 1000, `tool list is ~${Math.round(size / 4)} tokens`)

      const created = (await client.callTool({ name: 'create_sandbox', arguments: {} })) as {
        content: { type: string; text?: string; data?: string; mimeType?: string }[]
      }
      const id = created.content[0]?.text as string
      assert.match(id, /^sbx-/)
      const call = async (name: string, args: Record<string, unknown>) =>
        (await client.callTool({ name, arguments: { sandbox_id: id, ...args } })) as typeof created & {
          isError?: boolean
        }
      await call('run_code', { code: 'x = 21' })
      const r = await call('run_code', { code: 'print("doubling")\nx * 2' })
      assert.match(r.content[0]?.text ?? '', /doubling[\s\S]*\[result\]\n42/)
      const plot = await call('run_code', { code: 'plt.plot([1, 3, 2]); plt.show()' })
      const image = plot.content.find((c) => c.type === 'image')
      assert.equal(image?.mimeType, 'image/png')
      assert.equal(
        Buffer.from(image?.data ?? '', 'base64')
          .subarray(1, 4)
          .toString(),
        'PNG',
      )
      await call('write_file', { path: '/work/note.txt', content: 'hi there' })
      assert.equal((await call('read_file', { path: '/work/note.txt' })).content[0]?.text, 'hi there')
      assert.match((await call('run_command', { command: 'ls /work' })).content[0]?.text ?? '', /exit 0\nnote.txt/)
      const failed = await call('run_code', { code: '1/0' })
      assert.match(failed.content[0]?.text ?? '', /ZeroDivisionError/)
      const missing = await client.callTool({ name: 'read_file', arguments: { sandbox_id: id, path: '/nope' } })
      assert.equal(missing.isError, true)
      await call('kill_sandbox', {})
    } finally {
      await client.close()
    }
  })
})
