// The E2B compatibility layer in-process (app.request), over a fake agent: the wire shapes the
// E2B clients read (REST bodies, Connect envelopes and errors) and who may call what.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { toE2b, toForkbox } from '../src/e2b/network.ts'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { envelope } from './connect.ts'
import { FakeAgent } from './fake-agent.ts'

let dir: string
let cp: ControlPlane
let key: string

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-e2b-'))
  cp = await createControlPlane({
    agent: new FakeAgent(),
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000 },
  })
  key = (await cp.keys.create({ name: 'e2b', format: 'e2b' })).key
})

afterEach(async () => {
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
})

async function createSandbox(): Promise<{ sandboxID: string; envdAccessToken: string; envdVersion: string }> {
  const res = await cp.app.request('/v2/sandboxes', {
    method: 'POST',
    headers: { 'X-API-KEY': key, 'content-type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', timeout: 60, metadata: { a: 'b' } }),
  })
  assert.equal(res.status, 201)
  return res.json()
}

function envd(sandboxId: string, token: string | null, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'E2b-Sandbox-Id': sandboxId,
    'E2b-Sandbox-Port': '49983',
    ...(token ? { 'X-Access-Token': token } : {}),
    ...extra,
  }
}

/** A Connect stream body as [flags, JSON] pairs. */
function envelopes(body: Buffer): [number, unknown][] {
  const out: [number, unknown][] = []
  for (let i = 0; i < body.length; ) {
    const len = body.readUInt32BE(i + 1)
    out.push([body.readUInt8(i), JSON.parse(body.subarray(i + 5, i + 5 + len).toString())])
    i += 5 + len
  }
  return out
}

describe('e2b compatibility layer', () => {
  it('issues e2b_ keys and creates a sandbox the way the clients read it', async () => {
    assert.match(key, /^e2b_[0-9a-f]{40}$/)
    const sbx = await createSandbox()
    assert.match(sbx.sandboxID, /^sbx-/)
    assert.equal(sbx.envdVersion, '0.6.3')
    // derived from the server secret: nothing in it names the key (its window's start, then the MAC)
    assert.match(sbx.envdAccessToken, /^[0-9a-f]{48}$/)
    const info = await cp.app.request(`/sandboxes/${sbx.sandboxID}`, { headers: { 'X-API-KEY': key } })
    const body = await info.json()
    assert.equal(body.state, 'running')
    assert.deepEqual(body.metadata, { a: 'b' })
    // forkbox's own API is untouched
    const own = await cp.app.request('/v1/sandboxes', { headers: { authorization: `Bearer ${key}` } })
    assert.equal(own.status, 200)
  })

  it('answers control-plane errors as {code, message} with forkbox code', async () => {
    const missing = await cp.app.request('/sandboxes/sbx-nope', { headers: { 'X-API-KEY': key } })
    assert.equal(missing.status, 404)
    const body = await missing.json()
    assert.equal(body.code, 404)
    assert.equal(body.errorCode, 'SANDBOX_NOT_FOUND')
    const anon = await cp.app.request('/v2/sandboxes')
    assert.equal(anon.status, 401)
    assert.equal((await anon.json()).errorCode, 'UNAUTHENTICATED')
    const withMcp = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': key },
      body: JSON.stringify({ templateID: 'base', mcp: { servers: {} } }),
    })
    assert.equal(withMcp.status, 501)
    const refused = await withMcp.json()
    assert.equal(refused.errorCode, 'NOT_IMPLEMENTED')
    assert.match(refused.message, /mcp/)
    // a filesystem-only pause is forkbox's onTimeout 'hibernate-disk'
    const fsPause = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': key },
      body: JSON.stringify({ templateID: 'base', autoPause: true, autoPauseMemory: false }),
    })
    assert.equal(fsPause.status, 201)
    const { sandboxID } = await fsPause.json()
    const info = await (await cp.app.request(`/sandboxes/${sandboxID}`, { headers: { 'X-API-KEY': key } })).json()
    assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: true })
  })

  it('streams process.Process/Start as Connect envelopes: start, data, end, end-of-stream', async () => {
    const sbx = await createSandbox()
    const res = await cp.app.request('/process.Process/Start', {
      method: 'POST',
      headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/connect+json' }),
      body: envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'] } }),
    })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'application/connect+json')
    assert.deepEqual(envelopes(Buffer.from(await res.arrayBuffer())), [
      [0, { event: { start: { pid: 42 } } }],
      [0, { event: { data: { stdout: Buffer.from('bg out\n').toString('base64') } } }],
      [0, { event: { end: { exitCode: 0, exited: true, status: 'exit status 0' } } }],
      [2, {}],
    ])
  })

  it('ends a stream with a Connect error, and answers unary errors with Connect codes', async () => {
    const sbx = await createSandbox()
    const res = await cp.app.request('/process.Process/Connect', {
      method: 'POST',
      headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/connect+json' }),
      body: envelope({ process: { pid: 7 } }),
    })
    const [end] = envelopes(Buffer.from(await res.arrayBuffer()))
    // the request id travels along, as in every error of ours
    const requestId = (end?.[1] as { error?: { requestId?: string } } | undefined)?.error?.requestId
    assert.match(String(requestId), /^req_[0-9a-f]{16}$/)
    assert.deepEqual(end, [
      2,
      {
        error: {
          code: 'not_found',
          message: 'no running process 7',
          errorCode: 'PROCESS_NOT_FOUND',
          requestId,
        },
      },
    ])
    // WatchDir (a server stream) reads its enveloped request; a refusal ends the stream as a Connect error
    const watch = await cp.app.request('/filesystem.Filesystem/WatchDir', {
      method: 'POST',
      headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/connect+json' }),
      body: envelope({ path: '/home/user/missing', recursive: true }),
    })
    assert.equal(watch.status, 200)
    const [watchEnd] = envelopes(Buffer.from(await watch.arrayBuffer()))
    assert.equal(watchEnd?.[0], 2)
    assert.equal((watchEnd?.[1] as { error?: { code?: string } } | undefined)?.error?.code, 'not_found')
    const stat = await cp.app.request('/filesystem.Filesystem/Stat', {
      method: 'POST',
      headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/json' }),
      body: JSON.stringify({ path: '../etc' }),
    })
    assert.equal(stat.status, 400)
    assert.equal((await stat.json()).code, 'invalid_argument')
  })

  it('streams a watch as envd does, and keeps a polled watcher until it is removed', async () => {
    const sbx = await createSandbox()
    const call = (method: string, body: unknown) =>
      cp.app.request(`/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/json' }),
        body: JSON.stringify(body),
      })
    const res = await cp.app.request('/filesystem.Filesystem/WatchDir', {
      method: 'POST',
      headers: envd(sbx.sandboxID, sbx.envdAccessToken, { 'content-type': 'application/connect+json' }),
      body: envelope({ path: '/home/user', recursive: true }),
    })
    // the stream stays open until the client goes: read the start and the events, then go
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let got = Buffer.alloc(0)
    while (envelopes(got).length < 6) got = Buffer.concat([got, (await reader.read()).value ?? Buffer.alloc(0)])
    await reader.cancel()
    assert.deepEqual(
      envelopes(got).map(([, m]) => m),
      [{ start: {} }, ...[1, 2, 3, 4, 5].map((type) => ({ filesystem: { name: 'sub/f.txt', type } }))],
    )
    const created = await call('CreateWatcher', { path: 'work', recursive: false })
    assert.equal(created.status, 200)
    const { watcherId } = (await created.json()) as { watcherId: string }
    const polled = (await (await call('GetWatcherEvents', { watcherId })).json()) as { events: unknown[] }
    assert.deepEqual(
      polled.events,
      [1, 2, 3, 4, 5].map((type) => ({ name: 'f.txt', type })),
    )
    assert.deepEqual(await (await call('GetWatcherEvents', { watcherId })).json(), { events: [] })
    assert.equal((await call('RemoveWatcher', { watcherId })).status, 200)
    const gone = await call('GetWatcherEvents', { watcherId })
    assert.equal(gone.status, 404)
    assert.equal(((await gone.json()) as { code: string }).code, 'not_found')
    // a refused watch takes no slot; the slots per sandbox are capped
    assert.equal((await call('CreateWatcher', { path: '/home/user/missing' })).status, 404)
    const made = await Promise.all(Array.from({ length: 129 }, () => call('CreateWatcher', { path: 'w' })))
    assert.deepEqual(
      [made.filter((r) => r.status === 200).length, made.filter((r) => r.status === 400).length],
      [128, 1],
    )
  })

  it('lets a sandbox token reach only its own sandbox', async () => {
    const a = await createSandbox()
    const b = await createSandbox()
    const health = async (id: string, token: string | null) =>
      (await cp.app.request('/health', { headers: envd(id, token) })).status
    assert.equal(await health(a.sandboxID, a.envdAccessToken), 204)
    assert.equal(await health(b.sandboxID, a.envdAccessToken), 401)
    assert.equal(await health(a.sandboxID, null), 401)
    assert.equal(await health(a.sandboxID, `${a.envdAccessToken}x`), 401)
    const wrongPort = await cp.app.request('/health', {
      headers: { ...envd(a.sandboxID, a.envdAccessToken), 'E2b-Sandbox-Port': '8080' },
    })
    assert.equal(wrongPort.status, 404)
    await cp.app.request(`/sandboxes/${a.sandboxID}`, { method: 'DELETE', headers: { 'X-API-KEY': key } })
    assert.equal(await health(a.sandboxID, a.envdAccessToken), 502)
    // a revoked key takes its sandboxes' tokens with it
    const keyId = (await cp.keys.list()).find((k) => key.startsWith(k.prefix))?.id as string
    await cp.keys.revoke(keyId)
    assert.equal(await health(b.sandboxID, b.envdAccessToken), 401)
  })

  it('pages the v2 list with X-Next-Token', async () => {
    for (let i = 0; i < 3; i++) await createSandbox()
    const page = (token?: string) =>
      cp.app.request(`/v2/sandboxes?limit=2${token ? `&nextToken=${token}` : ''}&metadata=a%3Db`, {
        headers: { 'X-API-KEY': key },
      })
    const first = await page()
    const next = first.headers.get('x-next-token')
    assert.equal((await first.json()).length, 2)
    assert.ok(next)
    const second = await page(next)
    assert.equal((await second.json()).length, 1)
    assert.equal(second.headers.get('x-next-token'), null)
  })

  it("translates E2B's egress settings (open unless denied, allowOut wins) to forkbox's (closed unless internet)", () => {
    assert.equal(toForkbox(undefined, undefined), undefined)
    assert.deepEqual(toForkbox(false, undefined), { internet: false, allowOut: [], denyOut: [] })
    assert.deepEqual(toForkbox(true, undefined), { internet: true, allowOut: [], denyOut: [] })
    assert.deepEqual(toForkbox(undefined, { denyOut: ['0.0.0.0/0', '1.1.1.1'], allowOut: ['1.1.1.1', 'pypi.org'] }), {
      internet: true,
      allowOut: ['1.1.1.1', 'pypi.org'],
      denyOut: [],
    })
    assert.deepEqual(toForkbox(undefined, { denyOut: ['10.0.0.0/8'] }), {
      internet: true,
      allowOut: [],
      denyOut: ['10.0.0.0/8'],
    })
    assert.deepEqual(toForkbox(false, { allowOut: ['pypi.org'] }), {
      internet: true,
      allowOut: ['pypi.org'],
      denyOut: [],
    })
    assert.throws(() => toForkbox(true, { rules: { 'a.com': [] } }), /not supported/)
    assert.deepEqual(toE2b({ internet: true, allowOut: ['pypi.org'], denyOut: [], ports: [] }), {
      allowInternetAccess: true,
      network: { allowOut: ['pypi.org'], denyOut: ['0.0.0.0/0'] },
    })
    assert.deepEqual(toE2b({ internet: false, allowOut: [], denyOut: [], ports: [] }).allowInternetAccess, false)
  })

  it('creates with an E2B allow-list and replaces it with PUT /sandboxes/{id}/network', async () => {
    const res = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': key },
      body: JSON.stringify({ templateID: 'base', network: { denyOut: ['0.0.0.0/0'], allowOut: ['203.0.113.7'] } }),
    })
    assert.equal(res.status, 201)
    const { sandboxID } = await res.json()
    const policy = async () =>
      (
        await (
          await cp.app.request(`/v1/sandboxes/${sandboxID}`, { headers: { authorization: `Bearer ${key}` } })
        ).json()
      ).network
    assert.deepEqual(await policy(), { internet: true, allowOut: ['203.0.113.7'], denyOut: [], ports: [] })
    const put = await cp.app.request(`/sandboxes/${sandboxID}/network`, {
      method: 'PUT',
      headers: { 'X-API-KEY': key },
      body: JSON.stringify({ allow_internet_access: false }),
    })
    assert.equal(put.status, 204)
    assert.equal((await policy()).internet, false)
    const bad = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': key },
      body: JSON.stringify({ network: { denyOut: ['not a rule!'] } }),
    })
    assert.equal(bad.status, 400)
    assert.equal((await bad.json()).errorCode, 'VALIDATION_FAILED')
  })
})
