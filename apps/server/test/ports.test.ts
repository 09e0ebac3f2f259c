// The exposed-port proxy over a fake agent whose sandboxes live on loopback: origins, the opt-in
// path route, what a sandbox's response may carry, and tokens that die with their key.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request, type Server } from 'node:http'
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, it } from 'node:test'
import { getRequestListener } from '@hono/node-server'
import { WebSocket, WebSocketServer } from 'ws'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

let dir: string
let cp: ControlPlane
let front: Server
let sandboxServer: TcpServer
let frontPort: number

/** A "sandbox" server on loopback answering every request with `response` (raw bytes). */
async function sandboxAnswering(response: string): Promise<number> {
  sandboxServer = createTcpServer((c) => {
    c.on('error', () => {})
    c.once('data', () => c.end(response))
  })
  await new Promise<void>((r) => sandboxServer.listen(0, '127.0.0.1', r))
  return (sandboxServer.address() as { port: number }).port
}

async function start(config: { portsPathRoute?: boolean } = {}) {
  dir = mkdtempSync(join(tmpdir(), 'fbx-ports-'))
  cp = await createControlPlane({
    agent: new FakeAgent(),
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', ...config },
  })
  front = createServer(getRequestListener(cp.app.fetch))
  front.on('upgrade', cp.upgrade)
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r))
  frontPort = (front.address() as { port: number }).port
}

afterEach(async () => {
  await new Promise((r) => front?.close(r))
  if (sandboxServer?.listening) await new Promise((r) => sandboxServer.close(r))
  await cp?.close()
  rmSync(dir, { recursive: true, force: true })
})

async function createSandbox(key: string, port: number) {
  const res = await cp.app.request('/v1/sandboxes', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ network: { ports: [port] } }),
  })
  return (await res.json()) as { id: string; accessToken: string; domain: string }
}

function get(host: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; reason: string; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: frontPort, path, headers: { ...headers, host } }, (res) => {
        let body = ''
        res.on('data', (d) => {
          body += d
        })
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, reason: res.statusMessage ?? '', headers: res.headers, body }),
        )
      })
      req.on('error', reject)
      req.end()
    },
  )
}

const HOSTILE =
  'HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\nSet-Cookie: a=1; Domain=localhost; Path=/\r\n' +
  'Set-Cookie: b=1; Path=/\r\nSet-Cookie: forkbox_token=forged; Path=/\r\nService-Worker-Allowed: /\r\n' +
  'Clear-Site-Data: "cookies"\r\nConnection: close\r\n\r\nok'

describe('exposed ports', () => {
  it('serve each sandbox port on its own host; a bad reason phrase is dropped, not fatal', async () => {
    const port = await sandboxAnswering(HOSTILE)
    await start()
    const key = cp.bootstrapKey as string
    const sbx = await createSandbox(key, port)
    assert.equal(sbx.domain, 'localhost')
    const res = await get(`${port}-${sbx.id}.localhost:${frontPort}`, '/', { 'x-api-key': key })
    assert.equal(res.status, 200)
    assert.equal(res.reason, 'OK')
    assert.equal(res.body, 'ok')
    // host-only cookies stay; one for the parent domain, or one named like our token, does not
    assert.deepEqual(res.headers['set-cookie'], ['b=1; Path=/'])
  })

  it('the path route is off by default; on, its responses are sandboxed and stripped of origin-wide headers', async () => {
    const port = await sandboxAnswering(HOSTILE)
    await start()
    let sbx = await createSandbox(cp.bootstrapKey as string, port)
    const off = await get(`127.0.0.1:${frontPort}`, `/s/${sbx.id}/${port}/`, { 'x-api-key': cp.bootstrapKey as string })
    assert.equal(off.status, 404)
    await new Promise((r) => front.close(r))
    await cp.close()
    rmSync(dir, { recursive: true, force: true })
    await start({ portsPathRoute: true })
    const key = cp.bootstrapKey as string
    sbx = await createSandbox(key, port)
    const on = await get(`127.0.0.1:${frontPort}`, `/s/${sbx.id}/${port}/`, { 'x-api-key': key })
    assert.equal(on.status, 200)
    assert.equal(on.headers['set-cookie'], undefined)
    assert.equal(on.headers['service-worker-allowed'], undefined)
    assert.equal(on.headers['clear-site-data'], undefined)
    assert.match(String(on.headers['content-security-policy']), /^sandbox /)
    assert.doesNotMatch(String(on.headers['content-security-policy']), /allow-same-origin/)
  })

  it("the access token opens only its own sandbox, and stops working once the owner's key is revoked", async () => {
    const port = await sandboxAnswering('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok')
    await start()
    const admin = cp.bootstrapKey as string
    const other = await cp.keys.create({ name: 'other' })
    const mine = await createSandbox(other.key, port)
    const theirs = await createSandbox(admin, port)
    const host = (id: string) => `${port}-${id}.localhost:${frontPort}`
    assert.equal((await get(host(mine.id), '/', { 'x-forkbox-access-token': mine.accessToken })).status, 200)
    assert.equal((await get(host(theirs.id), '/', { 'x-forkbox-access-token': mine.accessToken })).status, 404)
    // the query token once, then the host-only cookie it set
    const first = await get(host(mine.id), `/?forkbox_token=${mine.accessToken}`)
    assert.match(String(first.headers['set-cookie']), /^forkbox_token=fbt_[0-9a-f]{40}; Path=\/; HttpOnly/)
    await cp.keys.revoke(other.id)
    assert.equal((await get(host(mine.id), '/', { 'x-forkbox-access-token': mine.accessToken })).status, 404)
  })

  it('carry WebSockets to the sandbox port; a refused upgrade is answered with our error body', async () => {
    const echo = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    echo.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo:${m}`)))
    await new Promise((r) => echo.once('listening', r))
    const port = (echo.address() as { port: number }).port
    try {
      await start()
      const key = cp.bootstrapKey as string
      const sbx = await createSandbox(key, port)
      const url = `ws://127.0.0.1:${frontPort}/`
      const host = `${port}-${sbx.id}.localhost:${frontPort}`
      const ws = new WebSocket(url, { headers: { host, 'x-forkbox-access-token': sbx.accessToken } })
      await new Promise((r, j) => ws.once('open', r).once('error', j))
      ws.send('hi')
      assert.equal(String(await new Promise((r) => ws.once('message', r))), 'echo:hi')
      ws.close()
      const refused = new WebSocket(url, { headers: { host } })
      const res = await new Promise<import('node:http').IncomingMessage>((r, j) =>
        refused.once('unexpected-response', (_req, res) => r(res)).once('open', () => j(new Error('opened'))),
      )
      let body = ''
      for await (const chunk of res) body += chunk
      assert.equal(res.statusCode, 401)
      const error = JSON.parse(body).error
      assert.equal(error.code, 'UNAUTHENTICATED')
      assert.match(error.requestId, /^req_/)
      // nothing listens on the port: the client still reads why, before any switch of protocol
      await new Promise((r) => echo.close(r))
      const down = new WebSocket(url, { headers: { host, 'x-api-key': key } })
      const status = await new Promise<number>((r, j) =>
        down
          .once('unexpected-response', (_req, res) => r(res.statusCode ?? 0))
          .once('open', () => j(new Error('opened'))),
      )
      assert.equal(status, 502)
    } finally {
      echo.close()
    }
  })

  it('carry upgrades to protocols other than WebSocket too', async () => {
    sandboxServer = createTcpServer((c) => {
      c.on('error', () => {})
      c.once('data', () => {
        c.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n')
        c.on('data', (d) => c.write(String(d).toUpperCase()))
      })
    })
    await new Promise<void>((r) => sandboxServer.listen(0, '127.0.0.1', r))
    const port = (sandboxServer.address() as { port: number }).port
    await start()
    const key = cp.bootstrapKey as string
    const sbx = await createSandbox(key, port)
    const socket = await new Promise<import('node:stream').Duplex>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: frontPort,
        path: '/socket',
        headers: { host: `${port}-${sbx.id}.localhost`, connection: 'Upgrade', upgrade: 'echo', 'x-api-key': key },
      })
      req.on('upgrade', (_res, s) => resolve(s))
      req.on('response', (res) => reject(new Error(`answered ${res.statusCode}`)))
      req.on('error', reject)
      req.end()
    })
    const answer = new Promise<string>((r) => socket.once('data', (d) => r(String(d))))
    socket.write('ping')
    assert.equal(await answer, 'PING')
    socket.destroy()
  })
})
