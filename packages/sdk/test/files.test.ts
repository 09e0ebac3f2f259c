import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConflictError, NotFoundError, Sandbox } from '../src/index.ts'
import { useTestServer } from './server.ts'

const server = useTestServer()

describe('files', () => {
  it('write PUTs the raw bytes with path and mode in the query', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const bytes = new Uint8Array([0, 1, 2, 255])
    const result = await sbx.files.write('/tmp/x.bin', bytes, { mode: 0o755 })
    assert.deepEqual(result, {
      name: 'x.bin',
      path: '/tmp/x.bin',
      type: 'file',
      size: 4,
      mode: 0o755,
      mtimeMs: 1,
      uid: 1000,
      gid: 1000,
    })
    const req = s.requests[1]
    assert.ok(req)
    assert.equal(req.method, 'PUT')
    assert.equal(req.url.pathname, `/v1/sandboxes/${sbx.id}/files`)
    assert.equal(req.headers.get('content-type'), 'application/octet-stream')
    assert.deepEqual(s.agent.files.get(sbx.id)?.get('/tmp/x.bin')?.bytes, bytes)
    assert.deepEqual(await sbx.files.read('/tmp/x.bin', { format: 'bytes' }), bytes)
  })

  it('write encodes a string as UTF-8 and leaves mode out when not given', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    await sbx.files.write('/home/user/notes.txt', 'héllo')
    assert.equal(await sbx.files.read('/home/user/notes.txt'), 'héllo')
    assert.equal(s.requests[1]?.url.searchParams.has('mode'), false)
    assert.equal(s.agent.files.get(sbx.id)?.get('/home/user/notes.txt')?.mode, 0o644)
  })

  it('percent-encodes awkward paths and ids', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const path = '/tmp/a b/ü&x=1#?+%.txt'
    await sbx.files.write(path, 'ok')
    assert.equal(await sbx.files.read(path), 'ok')
    assert.deepEqual([...(s.agent.files.get(sbx.id)?.keys() ?? [])], ['/home/user', path])
    await assert.rejects(Sandbox.connect('sbx/../odd id', s.conn()), (err: unknown) => {
      assert.ok(err instanceof NotFoundError)
      assert.equal(err.code, 'SANDBOX_NOT_FOUND')
      assert.equal(s.requests.at(-1)?.url.pathname, '/v1/sandboxes/sbx%2F..%2Fodd%20id')
      return true
    })
  })

  it('read returns text or bytes', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    await sbx.files.write('/f', new Uint8Array([104, 105, 0, 200]))
    assert.deepEqual(await sbx.files.read('/f', { format: 'bytes' }), new Uint8Array([104, 105, 0, 200]))
    assert.equal((await sbx.files.read('/f')).slice(0, 2), 'hi')
  })

  it('list, stat, makeDir, rename and remove use their routes', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    await sbx.files.write('/home/user/a.txt', 'abc')
    const [listed] = await sbx.files.list('/home/user', { depth: 2 })
    assert.equal(listed?.path, '/home/user/a.txt')
    assert.equal((await sbx.files.stat('/home/user/a.txt')).size, 3)
    assert.equal((await sbx.files.makeDir('/tmp/d')).type, 'dir')
    assert.equal((await sbx.files.rename('/home/user/a.txt', '/tmp/b')).path, '/tmp/b')
    await sbx.files.remove('/tmp/d', { recursive: false })
    assert.deepEqual([...(s.agent.files.get(sbx.id)?.keys() ?? [])], ['/home/user', '/tmp/b'])
    const seen = s.requests.slice(2).map((r) => `${r.method} ${r.url.pathname}${r.url.search}`)
    const base = `/v1/sandboxes/${sbx.id}/files`
    assert.deepEqual(seen, [
      `GET ${base}/list?path=%2Fhome%2Fuser&depth=2`,
      `GET ${base}/stat?path=%2Fhome%2Fuser%2Fa.txt`,
      `POST ${base}/mkdir`,
      `POST ${base}/rename`,
      `DELETE ${base}?path=%2Ftmp%2Fd&recursive=false`,
    ])
  })

  it('exists is false only for a missing file', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    await sbx.files.write('/here', 'x')
    assert.equal(await sbx.files.exists('/here'), true)
    assert.equal(await sbx.files.exists('/gone'), false)
    await Sandbox.kill(sbx.id, s.conn())
    // anything but FILE_NOT_FOUND is the caller's to see
    await assert.rejects(sbx.files.exists('/here'), (err: unknown) => {
      assert.ok(err instanceof ConflictError)
      assert.equal(err.code, 'SANDBOX_NOT_RUNNING')
      return true
    })
  })
})
