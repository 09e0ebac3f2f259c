import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ForkboxClient, Sandbox } from '../src/index.ts'
import { bodyJson, conn, fakeFetch, json, sandboxInfo } from './fake-fetch.ts'

const execResult = {
  exitCode: 3,
  signal: null,
  stdout: 'out\n',
  stderr: 'err\n',
  encoding: 'utf8',
  timedOut: false,
  truncated: false,
  durationMs: 12,
}

describe('Sandbox', () => {
  it('create sends only the given fields with the bearer key', async () => {
    const fake = fakeFetch(() => json(201, sandboxInfo({ metadata: { a: 'b' } })))
    const sbx = await Sandbox.create({ ...conn(fake), template: 'python', ttlSeconds: 60, metadata: { a: 'b' } })
    const req = fake.requests[0]
    assert.ok(req)
    assert.equal(req.method, 'POST')
    assert.equal(req.url.href, 'http://forkbox.test/v1/sandboxes')
    assert.equal(req.headers.get('authorization'), 'Bearer fbx_test')
    assert.deepEqual(bodyJson(req), { template: 'python', ttlSeconds: 60, metadata: { a: 'b' } })
    assert.equal(sbx.id, 'sbx_1')
    assert.deepEqual(sbx.info.metadata, { a: 'b' })
  })

  it('list filters by state and metadata pairs', async () => {
    const fake = fakeFetch(() => json(200, { sandboxes: [sandboxInfo()] }))
    const list = await Sandbox.list({ ...conn(fake), state: 'running', metadata: { user: 'a b', 'k.x': '1' } })
    assert.equal(list.length, 1)
    const params = fake.requests[0]?.url.searchParams
    assert.equal(params?.get('state'), 'running')
    assert.equal(params?.get('metadata.user'), 'a b')
    assert.equal(params?.get('metadata.k.x'), '1')
  })

  it('exec returns strings and sends stdin bytes as base64', async () => {
    const fake = fakeFetch((_req, n) => (n === 0 ? json(201, sandboxInfo()) : json(200, execResult)))
    const sbx = await Sandbox.create(conn(fake))
    const out = await sbx.exec(['cat'], { stdin: new Uint8Array([1, 2, 3]), timeoutSeconds: 5, cwd: '/tmp' })
    assert.deepEqual(out, {
      exitCode: 3,
      stdout: 'out\n',
      stderr: 'err\n',
      signal: null,
      timedOut: false,
      truncated: false,
      durationMs: 12,
    })
    const req = fake.requests[1]
    assert.ok(req)
    assert.equal(req.url.pathname, '/v1/sandboxes/sbx_1/exec')
    assert.deepEqual(bodyJson(req), {
      cmd: ['cat'],
      cwd: '/tmp',
      timeoutSeconds: 5,
      encoding: 'utf8',
      stdin: 'AQID',
      stdinEncoding: 'base64',
    })
  })

  it('execBytes asks for base64 and decodes it', async () => {
    const fake = fakeFetch((_req, n) =>
      n === 0 ? json(201, sandboxInfo()) : json(200, { ...execResult, encoding: 'base64', stdout: '/wA=', stderr: '' }),
    )
    const sbx = await Sandbox.create(conn(fake))
    const out = await sbx.execBytes('printf x', { stdin: 'text' })
    assert.deepEqual(out.stdout, new Uint8Array([255, 0]))
    assert.deepEqual(out.stderr, new Uint8Array())
    assert.deepEqual(bodyJson(fake.requests[1]), { cmd: 'printf x', stdin: 'text', encoding: 'base64' })
  })

  it('setTimeout and getInfo refresh info', async () => {
    const fake = fakeFetch((_req, n) => json(n === 0 ? 201 : 200, sandboxInfo({ expiresAt: `t${n}` })))
    const sbx = await Sandbox.create(conn(fake))
    assert.equal((await sbx.setTimeout(600)).expiresAt, 't1')
    assert.equal(sbx.info.expiresAt, 't1')
    assert.deepEqual(bodyJson(fake.requests[1]), { ttlSeconds: 600 })
    await sbx.getInfo()
    assert.equal(sbx.info.expiresAt, 't2')
  })

  it('await using kills the sandbox at the end of the block', async () => {
    const fake = fakeFetch((req) =>
      req.method === 'DELETE' ? new Response(null, { status: 204 }) : json(201, sandboxInfo()),
    )
    {
      await using sbx = await Sandbox.create(conn(fake))
      assert.equal(sbx.id, 'sbx_1')
    }
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.url.pathname}`),
      ['POST /v1/sandboxes', 'DELETE /v1/sandboxes/sbx_1'],
    )
  })
})

describe('ForkboxClient', () => {
  it('creates, lists and revokes keys', async () => {
    const info = { id: 'key_1', name: 'ci', prefix: 'fbx_ab', createdAt: 'now', revokedAt: null }
    const fake = fakeFetch((req) => {
      if (req.method === 'POST') return json(201, { ...info, key: 'fbx_secret' })
      if (req.method === 'DELETE') return new Response(null, { status: 204 })
      return json(200, { keys: [info] })
    })
    const client = new ForkboxClient(conn(fake))
    assert.equal((await client.keys.create('ci')).key, 'fbx_secret')
    assert.deepEqual(await client.keys.list(), [info])
    await client.keys.revoke('key/1')
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.url.pathname}`),
      ['POST /v1/keys', 'GET /v1/keys', 'DELETE /v1/keys/key%2F1'],
    )
    assert.deepEqual(bodyJson(fake.requests[0]), { name: 'ci' })
  })
})
