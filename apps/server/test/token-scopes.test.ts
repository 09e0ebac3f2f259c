// Scopes on tokens, in-process over a fake agent: a sandbox's envd token, port token and signed
// file URLs (E2B's and forkbox's) do what their owner's key may do now (a key made read-only
// stops its tokens' writes at once), and an E2B signed URL without an expiration ages out.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, it, mock } from 'node:test'
import type { AgentSandbox, GuestExecRequest } from '@forkbox/protocol'
import { getRequestListener } from '@hono/node-server'
import type { ServerConfigInput } from '../src/config.ts'
import { e2bApi } from '../src/e2b/index.ts'
import { CONNECT_METHODS } from '../src/e2b/scopes.ts'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { envelope } from './connect.ts'
import { FakeAgent } from './fake-agent.ts'

/** Remembers what reached the sandbox: a write refused at the edge never gets here. */
class RecordingAgent extends FakeAgent {
  wrote: string[] = []
  protected override guestOf(id: string): AgentSandbox {
    const guest = super.guestOf(id)
    return Object.assign(super.guestOf(id), {
      startProcess: (req: GuestExecRequest) => {
        this.wrote.push('startProcess')
        return guest.startProcess(req)
      },
      writeFile: (...args: Parameters<AgentSandbox['writeFile']>) => {
        this.wrote.push(`writeFile ${args[0]}`)
        return guest.writeFile(...args)
      },
    } satisfies Partial<AgentSandbox>)
  }
}

let dir: string
let cp: ControlPlane
let agent: RecordingAgent

async function start(config: Partial<ServerConfigInput> = {}) {
  dir = mkdtempSync(join(tmpdir(), 'fbx-token-scopes-'))
  agent = new RecordingAgent()
  cp = await createControlPlane({
    agent,
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000, ...config },
  })
}

afterEach(async () => {
  mock.timers.reset()
  await cp?.close()
  rmSync(dir, { recursive: true, force: true })
})

/** A key that makes a sandbox (E2B's create), then is made read-only: what the sandbox was handed stays. */
async function readOnlyOwner() {
  const owner = await cp.keys.create({ name: 'owner', format: 'e2b' })
  const created = await cp.app.request('/v2/sandboxes', {
    method: 'POST',
    headers: { 'X-API-KEY': owner.key, 'content-type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', timeout: 3600 }),
  })
  assert.equal(created.status, 201)
  const sbx = (await created.json()) as { sandboxID: string; envdAccessToken: string }
  await cp.keys.update(owner.id, { scopes: { readOnly: true } })
  return { key: owner.key, id: sbx.sandboxID, createdToken: sbx.envdAccessToken }
}

const envd = (id: string, creds: Record<string, string>, type = 'application/json') => ({
  'E2b-Sandbox-Id': id,
  'E2b-Sandbox-Port': '49983',
  'content-type': type,
  ...creds,
})

/** A unary Connect call: its status and body. */
async function unary(id: string, creds: Record<string, string>, method: string, msg: unknown) {
  const res = await cp.app.request(`/${method}`, {
    method: 'POST',
    headers: envd(id, creds),
    body: JSON.stringify(msg),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

/** A server-streaming Connect call: the end-of-stream message (what an error ends it with). */
async function streamEnd(id: string, creds: Record<string, string>, method: string, msg: unknown) {
  const res = await cp.app.request(`/${method}`, {
    method: 'POST',
    headers: envd(id, creds, 'application/connect+json'),
    body: envelope(msg),
  })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) return { status: res.status, end: JSON.parse(body.toString()) }
  let end: unknown = null
  for (let i = 0; i < body.length; ) {
    const len = body.readUInt32BE(i + 1)
    if (body.readUInt8(i) & 0b10) end = JSON.parse(body.subarray(i + 5, i + 5 + len).toString())
    i += 5 + len
  }
  return { status: res.status, end: end as { error?: Record<string, unknown> } }
}

const READ_ONLY = { errorCode: 'FORBIDDEN', message: 'this key is read-only' }

describe("a read-only key's envd token (item 4)", () => {
  it('is handed out, and reads with it, but cannot start a process, write a file or change the filesystem', async () => {
    await start()
    const owner = await readOnlyOwner()
    // GET /sandboxes/{id} (what Sandbox.connect's info and the issue used) still hands the token out
    const info = await cp.app.request(`/sandboxes/${owner.id}`, { headers: { 'X-API-KEY': owner.key } })
    assert.equal(info.status, 200)
    const { envdAccessToken } = (await info.json()) as { envdAccessToken: string }
    assert.ok(envdAccessToken)
    // the token of today and the one handed out while the key could still write: both read only
    for (const token of [envdAccessToken, owner.createdToken]) {
      const creds = { 'X-Access-Token': token }
      const started = await streamEnd(owner.id, creds, 'process.Process/Start', {
        process: { cmd: '/bin/bash', args: ['-c', 'touch /tmp/pwned'] },
      })
      assert.equal(started.status, 200)
      assert.deepEqual(
        { code: started.end.error?.code, errorCode: started.end.error?.errorCode, message: started.end.error?.message },
        { code: 'permission_denied', ...READ_ONLY },
      )
      const upload = await cp.app.request('/files?path=/tmp/pwned', {
        method: 'POST',
        headers: envd(owner.id, creds, 'application/octet-stream'),
        body: 'x',
      })
      assert.equal(upload.status, 403)
      assert.deepEqual(
        await upload.json().then((b: Record<string, unknown>) => ({ errorCode: b.errorCode, message: b.message })),
        READ_ONLY,
      )
      for (const [method, msg] of [
        ['filesystem.Filesystem/MakeDir', { path: '/tmp/d' }],
        ['filesystem.Filesystem/Remove', { path: '/tmp/d' }],
        ['filesystem.Filesystem/Move', { source: '/tmp/a', destination: '/tmp/b' }],
        ['process.Process/SendInput', { process: { pid: 42 }, input: { stdin: 'eA==' } }],
        ['process.Process/SendSignal', { process: { pid: 42 }, signal: 'SIGNAL_SIGKILL' }],
        ['process.Process/Update', { process: { pid: 42 }, pty: { size: { cols: 1, rows: 1 } } }],
      ] as const) {
        const res = await unary(owner.id, creds, method, msg)
        assert.equal(res.status, 403, `${method}: ${JSON.stringify(res.body)}`)
        assert.equal(res.body.errorCode, 'FORBIDDEN', method)
      }
      // reads go through
      assert.equal((await unary(owner.id, creds, 'filesystem.Filesystem/Stat', { path: '/tmp' })).status, 200)
      assert.equal((await unary(owner.id, creds, 'filesystem.Filesystem/ListDir', { path: '/tmp' })).status, 200)
      assert.equal((await unary(owner.id, creds, 'process.Process/List', {})).status, 200)
      const health = await cp.app.request('/health', { headers: envd(owner.id, creds) })
      assert.equal(health.status, 204)
    }
    assert.deepEqual(agent.wrote, [])
  })

  it('the key itself reads through envd too (Connect reads are POSTs), and writes with it are refused', async () => {
    await start()
    const owner = await readOnlyOwner()
    const creds = { 'X-API-KEY': owner.key }
    assert.equal((await unary(owner.id, creds, 'filesystem.Filesystem/Stat', { path: '/tmp' })).status, 200)
    const made = await unary(owner.id, creds, 'filesystem.Filesystem/MakeDir', { path: '/tmp/d' })
    assert.equal(made.status, 403)
    assert.equal(made.body.errorCode, 'FORBIDDEN')
  })

  it("a key made writable again writes with the same token: the owner's scopes are read at each call", async () => {
    await start()
    const owner = await readOnlyOwner()
    const creds = { 'X-Access-Token': owner.createdToken }
    assert.equal((await unary(owner.id, creds, 'filesystem.Filesystem/Remove', { path: '/tmp/d' })).status, 403)
    const [key] = (await cp.keys.list()).filter((k) => k.name === 'owner')
    await cp.keys.update(key?.id as string, { scopes: {} })
    assert.equal((await unary(owner.id, creds, 'filesystem.Filesystem/Remove', { path: '/tmp/d' })).status, 200)
  })

  it('Sandbox.connect works for a read-only key; lengthening the timeout with it does not', async () => {
    await start()
    const owner = await readOnlyOwner()
    const connect = (body: unknown) =>
      cp.app.request(`/v2/sandboxes/${owner.id}/connect`, {
        method: 'POST',
        headers: { 'X-API-KEY': owner.key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const ok = await connect({})
    assert.equal(ok.status, 200)
    assert.ok(((await ok.json()) as { envdAccessToken?: string }).envdAccessToken)
    const longer = await connect({ timeout: 7200 })
    assert.equal(longer.status, 403)
    assert.equal(((await longer.json()) as { errorCode: string }).errorCode, 'FORBIDDEN')
    // resume (E2B's older form of the same) and kill stay writes
    const killed = await cp.app.request(`/sandboxes/${owner.id}`, {
      method: 'DELETE',
      headers: { 'X-API-KEY': owner.key },
    })
    assert.equal(killed.status, 403)
  })

  it('an E2B signed URL of a read-only owner reads, and its write URL is refused', async () => {
    await start()
    const owner = await readOnlyOwner()
    const sign = (path: string, op: string) =>
      `v1_${createHash('sha256').update(`${path}:${op}::${owner.createdToken}`).digest('base64').replace(/=+$/, '')}`
    const url = (path: string, op: string) => `/files?${new URLSearchParams({ path, signature: sign(path, op) })}`
    const write = await cp.app.request(url('/tmp/pwned', 'write'), {
      method: 'POST',
      headers: { 'E2b-Sandbox-Id': owner.id, 'content-type': 'application/octet-stream' },
      body: 'x',
    })
    assert.equal(write.status, 403)
    assert.equal(((await write.json()) as { errorCode: string }).errorCode, 'FORBIDDEN')
    // the fake agent has no files: a read gets as far as the sandbox
    const read = await cp.app.request(url('/tmp/a', 'read'), { headers: { 'E2b-Sandbox-Id': owner.id } })
    assert.equal(((await read.json()) as { errorCode: string }).errorCode, 'FILE_NOT_FOUND')
    assert.deepEqual(agent.wrote, [])
  })

  it('every Connect method envd serves is classified as a read or a write', () => {
    const served = e2bApi({ maxJsonBodyBytes: 1024, maxUploadBytes: 1024 })
      .routes.map((r) => r.path.slice(1))
      .filter((p) => /^(process\.Process|filesystem\.Filesystem)\/\w+$/.test(p))
    assert.ok(served.length >= 15, served.join(' '))
    assert.deepEqual([...new Set(served)].sort(), Object.keys(CONNECT_METHODS).sort())
  })
})

describe("a read-only key's port token (item 4)", () => {
  let front: Server
  let upstream: Server
  afterEach(async () => {
    await new Promise((r) => front?.close(r))
    await new Promise((r) => upstream?.close(r))
  })

  it('GETs an exposed port, and is refused a POST or an upgrade', async () => {
    let reached = 0
    upstream = createServer((_req, res) => {
      reached++
      res.end('ok')
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const port = (upstream.address() as { port: number }).port
    await start()
    front = createServer(getRequestListener(cp.app.fetch))
    front.on('upgrade', cp.upgrade)
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r))
    const frontPort = (front.address() as { port: number }).port
    const owner = await cp.keys.create({ name: 'owner' })
    const created = await cp.app.request('/v1/sandboxes', {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ network: { ports: [port] } }),
    })
    const sbx = (await created.json()) as { id: string; accessToken: string }
    await cp.keys.update(owner.id, { scopes: { readOnly: true } })
    const call = (method: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: frontPort,
            method,
            path: '/',
            headers: { host: `${port}-${sbx.id}.localhost`, 'x-forkbox-access-token': sbx.accessToken, ...headers },
          },
          (res) => {
            let body = ''
            res.on('data', (d) => {
              body += d
            })
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
          },
        )
        req.on('error', reject)
        req.on('upgrade', (res, socket) => {
          socket.destroy()
          resolve({ status: res.statusCode ?? 0, body: '' })
        })
        req.end(method === 'POST' ? 'x' : undefined)
      })
    assert.deepEqual(await call('GET'), { status: 200, body: 'ok' })
    const posted = await call('POST')
    assert.equal(posted.status, 403)
    assert.equal(JSON.parse(posted.body).error.code, 'FORBIDDEN')
    assert.deepEqual(JSON.parse(posted.body).error.details, { scope: 'readOnly' })
    const upgraded = await call('GET', { connection: 'Upgrade', upgrade: 'websocket' })
    assert.equal(upgraded.status, 403)
    // the owner's key on the port is held to the same rule
    assert.equal((await call('POST', { 'x-forkbox-access-token': '', 'x-api-key': owner.key })).status, 403)
    assert.equal(reached, 1)
  })
})

describe('forkbox signed file URLs carry the owner key’s current scopes (item 9)', () => {
  it('a write URL made before its key was made read-only no longer writes; a read URL reads', async () => {
    await start()
    const owner = await cp.keys.create({ name: 'owner' })
    const api = (method: string, path: string, body?: unknown) =>
      cp.app.request(path, {
        method,
        headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const sbx = (await (await api('POST', '/v1/sandboxes', {})).json()) as { id: string }
    const mint = async (operation: string) =>
      (
        (await (await api('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: '/work/a', operation })).json()) as {
          path: string
        }
      ).path
    const writeUrl = await mint('write')
    const readUrl = await mint('read')
    assert.equal((await cp.app.request(writeUrl, { method: 'PUT', body: 'before' })).status, 200)
    await cp.keys.update(owner.id, { scopes: { readOnly: true } })
    const refused = await cp.app.request(writeUrl, { method: 'PUT', body: 'after' })
    assert.equal(refused.status, 403)
    const { error } = (await refused.json()) as { error: { code: string; message: string; details: unknown } }
    assert.deepEqual(error, {
      ...error,
      code: 'FORBIDDEN',
      message: 'this key is read-only',
      details: { scope: 'readOnly' },
    })
    // the fake agent has no files: a read URL gets as far as the sandbox
    const read = await cp.app.request(readUrl)
    assert.equal(((await read.json()) as { error: { code: string } }).error.code, 'FILE_NOT_FOUND')
    // and the read-only key cannot mint a write URL
    const minted = await api('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: '/work/a', operation: 'write' })
    assert.equal(minted.status, 403)
    assert.equal(agent.wrote.filter((w) => w.includes('/work/a')).length, 1)
  })
})

describe('E2B signed URLs without an expiration (item 7)', () => {
  /** E2B's getSignature. */
  const sign = (path: string, op: string, token: string, expiration?: number) =>
    `v1_${createHash('sha256')
      .update([path, op, '', token, ...(expiration ? [expiration] : [])].join(':'))
      .digest('base64')
      .replace(/=+$/, '')}`

  async function sandbox() {
    const owner = await cp.keys.create({ name: 'owner', format: 'e2b' })
    const res = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': owner.key, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', timeout: 7 * 24 * 3600 }),
    })
    const sbx = (await res.json()) as { sandboxID: string; envdAccessToken: string }
    const upload = (token: string, expiration?: number) =>
      cp.app.request(
        `/files?${new URLSearchParams({
          path: '/tmp/f',
          signature: sign('/tmp/f', 'write', token, expiration),
          ...(expiration ? { signature_expiration: String(expiration) } : {}),
        })}`,
        {
          method: 'POST',
          headers: { 'E2b-Sandbox-Id': sbx.sandboxID, 'content-type': 'application/octet-stream' },
          body: 'x',
        },
      )
    const connect = async () =>
      (
        (await (
          await cp.app.request(`/sandboxes/${sbx.sandboxID}`, { headers: { 'X-API-KEY': owner.key } })
        ).json()) as { envdAccessToken: string }
      ).envdAccessToken
    return { id: sbx.sandboxID, token: sbx.envdAccessToken, upload, connect }
  }

  it('by default one works at most an hour after its token was handed out (no sooner than half), then not', async () => {
    const t0 = Date.now()
    mock.timers.enable({ apis: ['Date'], now: t0 })
    await start()
    const s = await sandbox()
    assert.equal((await s.upload(s.token)).status, 200)
    // half the cap later it still works: the token's window is the current or the previous one
    mock.timers.setTime(t0 + 1800_000 - 1000)
    assert.equal((await s.upload(s.token)).status, 200)
    // the cap later it never does
    mock.timers.setTime(t0 + 3600_000)
    const aged = await s.upload(s.token)
    assert.equal(aged.status, 401)
    assert.match(((await aged.json()) as { message: string }).message, /at most 3600 s .*useSignatureExpiration/)
    // the old token still works for calls; a new one (connect again) signs URLs that work
    const health = await cp.app.request('/health', { headers: { 'E2b-Sandbox-Id': s.id, 'X-Access-Token': s.token } })
    assert.equal(health.status, 204)
    assert.equal((await s.upload(await s.connect())).status, 200)
    // a URL with an expiration is bounded by it, whatever its token's age
    const exp = Math.floor(Date.now() / 1000) + 60
    assert.equal((await s.upload(s.token, exp)).status, 200)
  })

  it('the cap follows FORKBOX_E2B_SIGNED_URL_MAX_SECONDS; off keeps E2B never-expiring form', async () => {
    const t0 = Date.now()
    mock.timers.enable({ apis: ['Date'], now: t0 })
    await start({ e2bSignedUrlMaxSeconds: 120 })
    let s = await sandbox()
    mock.timers.setTime(t0 + 120_000)
    assert.equal((await s.upload(s.token)).status, 401)
    await cp.close()
    rmSync(dir, { recursive: true, force: true })
    await start({ e2bSignedUrlMaxSeconds: 'off' })
    s = await sandbox()
    mock.timers.setTime(t0 + 30 * 24 * 3600_000)
    assert.equal((await s.upload(s.token)).status, 200)
  })
})
