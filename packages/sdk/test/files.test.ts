import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { NotFoundError, Sandbox } from '../src/index.ts'
import { conn, errorResponse, type FakeHandler, fakeFetch, json, sandboxInfo } from './fake-fetch.ts'

const entry = {
  name: 'a.txt',
  path: '/home/user/a.txt',
  type: 'file',
  size: 3,
  mode: 0o644,
  mtimeMs: 1,
  uid: 1000,
  gid: 1000,
}

/** Answers the connect GET, then hands every later request to `handler`. */
async function sandboxWith(handler: FakeHandler, id = 'sbx_1') {
  const fake = fakeFetch((req, n) => (n === 0 ? json(200, sandboxInfo({ id })) : handler(req, n)))
  const sbx = await Sandbox.connect(id, conn(fake))
  return { sbx, requests: fake.requests }
}

describe('files', () => {
  it('write PUTs the raw bytes with path and mode in the query', async () => {
    const { sbx, requests } = await sandboxWith(() => json(200, entry))
    const bytes = new Uint8Array([0, 1, 2, 255])
    const result = await sbx.files.write('/tmp/x.bin', bytes, { mode: 0o755 })
    assert.deepEqual(result, entry)
    const req = requests[1]
    assert.ok(req)
    assert.equal(req.method, 'PUT')
    assert.equal(req.url.pathname, '/v1/sandboxes/sbx_1/files')
    assert.equal(req.url.searchParams.get('path'), '/tmp/x.bin')
    assert.equal(req.url.searchParams.get('mode'), '493')
    assert.equal(req.headers.get('content-type'), 'application/octet-stream')
    assert.deepEqual(req.body, bytes)
  })

  it('write encodes a string as UTF-8 and leaves mode out when not given', async () => {
    const { sbx, requests } = await sandboxWith(() => json(200, entry))
    await sbx.files.write('notes.txt', 'héllo')
    assert.equal(new TextDecoder().decode(requests[1]?.body), 'héllo')
    assert.equal(requests[1]?.url.searchParams.has('mode'), false)
  })

  it('percent-encodes awkward paths and ids', async () => {
    const path = '/tmp/a b/ü&x=1#?+%.txt'
    const { sbx, requests } = await sandboxWith(() => new Response('ok'), 'sbx/../odd id')
    assert.equal(await sbx.files.read(path), 'ok')
    const req = requests[1]
    assert.ok(req)
    assert.equal(req.url.pathname, '/v1/sandboxes/sbx%2F..%2Fodd%20id/files')
    assert.equal(req.url.searchParams.get('path'), path)
    assert.equal([...req.url.searchParams.keys()].length, 1)
    assert.equal(req.url.hash, '')
  })

  it('read returns text or bytes', async () => {
    const { sbx } = await sandboxWith(() => new Response(new Uint8Array([104, 105, 0, 200])))
    assert.deepEqual(await sbx.files.read('f', { format: 'bytes' }), new Uint8Array([104, 105, 0, 200]))
    assert.equal((await sbx.files.read('f')).slice(0, 2), 'hi')
  })

  it('list, stat, makeDir, rename and remove use their routes', async () => {
    const { sbx, requests } = await sandboxWith((req) => {
      if (req.method === 'DELETE') return new Response(null, { status: 204 })
      if (req.url.pathname.endsWith('/list')) return json(200, { entries: [entry] })
      return json(200, entry)
    })
    assert.deepEqual(await sbx.files.list('/home/user', { depth: 2 }), [entry])
    await sbx.files.stat('a.txt')
    await sbx.files.makeDir('/tmp/d')
    await sbx.files.rename('/tmp/a', '/tmp/b')
    await sbx.files.remove('/tmp/d', { recursive: false })
    const seen = requests.slice(1).map((r) => `${r.method} ${r.url.pathname}${r.url.search}`)
    assert.deepEqual(seen, [
      'GET /v1/sandboxes/sbx_1/files/list?path=%2Fhome%2Fuser&depth=2',
      'GET /v1/sandboxes/sbx_1/files/stat?path=a.txt',
      'POST /v1/sandboxes/sbx_1/files/mkdir',
      'POST /v1/sandboxes/sbx_1/files/rename',
      'DELETE /v1/sandboxes/sbx_1/files?path=%2Ftmp%2Fd&recursive=false',
    ])
    assert.deepEqual(JSON.parse(new TextDecoder().decode(requests[4]?.body)), { from: '/tmp/a', to: '/tmp/b' })
  })

  it('exists is false only for a missing file', async () => {
    const { sbx } = await sandboxWith((req) =>
      req.url.searchParams.get('path') === 'gone'
        ? errorResponse(404, 'FILE_NOT_FOUND')
        : errorResponse(404, 'SANDBOX_NOT_FOUND'),
    )
    assert.equal(await sbx.files.exists('gone'), false)
    await assert.rejects(sbx.files.exists('other'), NotFoundError)
  })
})
