// The guest client's pass-through operations: each result is checked against its operation's
// schema, so what reaches the server is typed, and a forged shape fails the connection.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'
import { GuestClient } from '../src/guest/client.ts'
import { GuestConnection } from '../src/guest/connection.ts'
import { encodeFrame, FrameType } from '../src/guest/frames.ts'
import { installGuest } from '../src/guest/install.ts'

/** A client over fake pipes whose guest answers each request on its channel with `answer(op)`. */
function client(answer: (op: string) => unknown) {
  const input = new PassThrough()
  const output = new PassThrough()
  const broken: string[] = []
  const conn = new GuestConnection(input, output, { onProtocolError: (_e, detail) => broken.push(detail) })
  input.on('data', (b: Buffer) => {
    const channel = b.readUInt32BE(5)
    const req = JSON.parse(b.subarray(9, 9 + b.readUInt32BE(0)).toString()) as { op: string }
    const msg = { type: 'result', value: answer(req.op) }
    setImmediate(() => output.emit('data', encodeFrame(FrameType.json, channel, Buffer.from(JSON.stringify(msg)))))
  })
  return { guest: new GuestClient(conn), broken }
}

const entry = { name: 'a', path: '/a', type: 'file', size: 1, mode: 420, mtimeMs: 0, uid: 0, gid: 0 }

describe('guest client', () => {
  it('answers each operation with its typed result', async () => {
    const { guest } = client((op) => (op === 'usage' ? { usedBytes: 12 } : op === 'list' ? [entry] : entry))
    const usage = await guest.fileOp({ op: 'usage' })
    assert.equal(usage.usedBytes, 12)
    const list = await guest.fileOp({ op: 'list', path: '/', depth: 1 })
    assert.deepEqual(list, [entry])
    const stat = await guest.fileOp({ op: 'stat', path: '/a' })
    assert.equal(stat.type, 'file')
  })

  it('fails the connection on a result of the wrong shape', async () => {
    const { guest, broken } = client(() => ({ usedBytes: 'lots' }))
    await assert.rejects(guest.fileOp({ op: 'usage' }), /broke the protocol/)
    assert.equal(broken.length, 1)
  })

  it('checks process and context results too', async () => {
    const { guest } = client(() => [{ id: 'python', language: 'nope', cwd: null, running: true }])
    await assert.rejects(guest.codeContext({ op: 'context_list' }), /broke the protocol/)
  })
})

describe('guest install', () => {
  it('copies the bundle once into a dir named by its hash, keeping its layout', () => {
    const root = mkdtempSync(join(tmpdir(), 'fbx-guest-'))
    try {
      const src = join(root, 'src')
      mkdirSync(join(src, 'pkg'), { recursive: true })
      writeFileSync(join(src, 'main.py'), 'print(1)\n')
      writeFileSync(join(src, 'pkg', 'wire.py'), 'X = 1\n')
      const bundle = (hash: string) => ({
        files: ['main.py', 'pkg/wire.py'].map((name) => ({ name, body: readFileSync(join(src, name)), mode: 0o644 })),
        hash,
      })
      const a = installGuest(join(root, 'templates'), bundle('aaaa'), '/usr/bin/python3')
      assert.equal(readFileSync(join(a.dir, 'pkg', 'wire.py'), 'utf8'), 'X = 1\n')
      writeFileSync(join(src, 'pkg', 'wire.py'), 'X = 2\n')
      // installed once: the same hash keeps the copy made first
      assert.deepEqual(installGuest(join(root, 'templates'), bundle('aaaa'), '/usr/bin/python3'), a)
      assert.equal(readFileSync(join(a.dir, 'pkg', 'wire.py'), 'utf8'), 'X = 1\n')
      const b = installGuest(join(root, 'templates'), bundle('bbbb'), '/usr/bin/python3')
      assert.equal(readFileSync(join(b.dir, 'pkg', 'wire.py'), 'utf8'), 'X = 2\n')
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
