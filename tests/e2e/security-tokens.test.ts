// Scopes on tokens against a real forkbox on real runsc (issue 31, item 4): a key made read-only
// reads through its sandbox's envd token (the official `e2b` client's Sandbox.connect, then
// files.read), and neither the client nor a raw Connect or envd call with that token runs a command
// or writes a file; a signed write URL made before is refused too (item 9). Nothing it tried
// reached the sandbox: once the key may write again, the sandbox shows none of it.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Sandbox } from 'e2b'
import { useTestHost } from './harness.ts'

const host = useTestHost()

const TIMEOUT_MS = 180_000
const READ_ONLY = /this key is read-only/

/** A forkbox REST call with the host's admin key (or `key`). */
async function api(method: string, path: string, body?: unknown, key = host().conn.apiKey) {
  const res = await fetch(`${host().conn.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, unknown> }
}

/** A Connect stream request body: one envelope (flags 0, big-endian length, JSON). */
function envelope(msg: unknown): Uint8Array<ArrayBuffer> {
  const data = Buffer.from(JSON.stringify(msg))
  const out = new Uint8Array(5 + data.length)
  new DataView(out.buffer).setUint32(1, data.length)
  out.set(data, 5)
  return out
}

/** The end-of-stream message of a Connect stream response body. */
function endOfStream(body: Buffer): { error?: { code: string; errorCode: string; message: string } } | null {
  for (let i = 0; i + 5 <= body.length; ) {
    const len = body.readUInt32BE(i + 1)
    if (body.readUInt8(i) & 0b10) return JSON.parse(body.subarray(i + 5, i + 5 + len).toString())
    i += 5 + len
  }
  return null
}

describe('scopes on tokens', () => {
  it("a read-only key's envd token reads, and neither runs a command nor writes a file", async () => {
    const url = host().conn.url
    const made = await api('POST', '/v1/keys', { name: 'soon-read-only', format: 'e2b' })
    const owner = made.body as { id: string; key: string }
    const opts = { apiKey: owner.key, apiUrl: url, sandboxUrl: url }
    const sbx = await Sandbox.create({ ...opts, timeoutMs: TIMEOUT_MS })
    try {
      await sbx.files.write('/home/user/notes.txt', 'written while writable')
      // a signed write URL (forkbox's own), made while the key could write
      const signed = await api(
        'POST',
        `/v1/sandboxes/${sbx.sandboxId}/files/url`,
        { path: '/tmp/by-url', operation: 'write' },
        owner.key,
      )
      assert.equal(signed.status, 200)

      assert.equal((await api('PATCH', `/v1/keys/${owner.id}`, { scopes: { readOnly: true } })).status, 200)

      // the official client: Sandbox.connect with the read-only key, then a read
      const ro = await Sandbox.connect(sbx.sandboxId, opts)
      assert.equal(await ro.files.read('/home/user/notes.txt'), 'written while writable')
      assert.ok((await ro.files.list('/home/user')).some((e) => e.name === 'notes.txt'))
      await assert.rejects(ro.commands.run('touch /tmp/pwned-by-client'), READ_ONLY)
      await assert.rejects(ro.files.write('/tmp/pwned-by-client', 'x'), READ_ONLY)
      await assert.rejects(ro.files.makeDir('/tmp/pwned-dir'), READ_ONLY)
      // the token the key was handed while it could write is read-only now as well
      for (const client of [ro, sbx]) {
        await assert.rejects(client.commands.run('touch /tmp/pwned-by-client'), READ_ONLY)
      }

      // raw calls with the token, as the issue made them: process.Process/Start and envd POST /files
      const token = (
        await (await fetch(`${url}/sandboxes/${sbx.sandboxId}`, { headers: { 'x-api-key': owner.key } })).json()
      ).envdAccessToken as string
      assert.ok(token)
      const headers = { 'e2b-sandbox-id': sbx.sandboxId, 'x-access-token': token }
      const start = await fetch(`${url}/process.Process/Start`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
        body: envelope({ process: { cmd: '/bin/bash', args: ['-c', 'touch /tmp/pwned-by-connect'] } }),
      })
      const end = endOfStream(Buffer.from(await start.arrayBuffer()))
      assert.equal(end?.error?.code, 'permission_denied')
      assert.equal(end?.error?.errorCode, 'FORBIDDEN')
      assert.match(end?.error?.message ?? '', READ_ONLY)
      const upload = await fetch(`${url}/files?path=/tmp/pwned-by-post`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/octet-stream' },
        body: 'x',
      })
      assert.equal(upload.status, 403)
      const refused = (await upload.json()) as { errorCode: string; message: string }
      assert.equal(refused.errorCode, 'FORBIDDEN')
      assert.match(refused.message, READ_ONLY)
      // and a read with the same token works
      const read = await fetch(`${url}/files?path=/home/user/notes.txt`, { headers })
      assert.equal(read.status, 200)
      assert.equal(await read.text(), 'written while writable')
      // the signed write URL made before is refused; its key is read-only now
      const put = await fetch(`${url}${(signed.body as { path: string }).path}`, { method: 'PUT', body: 'x' })
      assert.equal(put.status, 403)
      assert.equal(((await put.json()) as { error: { code: string } }).error.code, 'FORBIDDEN')

      // writable again: the same client's token writes, and nothing the read-only key tried is there
      assert.equal((await api('PATCH', `/v1/keys/${owner.id}`, { scopes: {} })).status, 200)
      const left = await sbx.commands.run('ls -d /tmp/pwned* /tmp/by-url 2>/dev/null; true')
      assert.equal(left.stdout, '')
    } finally {
      await api('PATCH', `/v1/keys/${owner.id}`, { scopes: {} })
      await sbx.kill()
    }
  })
})
