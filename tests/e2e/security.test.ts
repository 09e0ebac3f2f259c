// The security review's findings (issue 13), reproduced against a real `forkbox up` in its own
// process on real runsc: after every attack the host process is the same PID, logged no uncaught
// error, and answers. Tenants A and B are two ordinary keys; B walks every route at A's sandbox.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import WebSocket from 'ws'
import { e2bApi } from '../../apps/server/src/e2b/index.ts'
import { leftovers, NOTHING_LEFT, type TestHost, sharedTemplatesDir as templatesDir, testSubnet } from './harness.ts'

const root = new URL('../..', import.meta.url).pathname

interface Server {
  url: string
  port: number
  adminKey: string
  dataDir: string
  /** The supervised host process (the one that must never die). */
  hostPid: number
  /** Everything the supervisor and host wrote on stderr. */
  stderr: () => string
  /** Waits for the next "host process N started" line after `after` chars of stderr. */
  nextHostPid: (after: number) => Promise<number>
  supervisor: ChildProcess
  asTestHost: Pick<TestHost, 'dataDir' | 'stateDir' | 'cgroupParent'>
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

async function until<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** `forkbox up` as a newcomer runs it (supervised), on fresh dirs, stdout not a terminal. */
async function startServer(): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'forkbox-sec-'))
  const configHome = join(dataDir, 'config')
  const tag = `fbx-sec-${process.pid}`
  const port = await freePort()
  const supervisor = spawn(process.execPath, [join(root, 'apps/cli/bin/forkbox.mjs'), 'up', '--port', String(port)], {
    env: {
      ...process.env,
      XDG_CONFIG_HOME: configHome,
      FORKBOX_DATA_DIR: join(dataDir, 'data'),
      FORKBOX_TEMPLATES_DIR: templatesDir,
      FORKBOX_RUNSC_STATE_DIR: `/run/${tag}`,
      FORKBOX_CGROUP_PARENT: tag,
      FORKBOX_PREBUILD: 'base',
      FORKBOX_POOL_SIZE: '1',
      FORKBOX_LOG_LEVEL: 'warn',
      FORKBOX_NETWORK_SUBNET: testSubnet(7),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  supervisor.stdout?.on('data', (d) => {
    out += d
  })
  supervisor.stderr?.on('data', (d) => {
    err += d
  })
  const nextHostPid = (from: number) =>
    until('the host process to start', () => {
      const m = /host process (\d+) started/.exec(err.slice(from))
      return m ? Number(m[1]) : undefined
    })
  const hostPid = await nextHostPid(0)
  await until('forkbox to be up', () => (out.includes('press Ctrl-C') ? true : undefined), 600_000)
  const url = /forkbox is up at (\S+)/.exec(out)?.[1] as string
  // stdout is not a terminal here: the key is in the credentials file, not in the output
  const { apiKey } = JSON.parse(readFileSync(join(configHome, 'forkbox', 'credentials.json'), 'utf8'))
  assert.doesNotMatch(out + err, new RegExp(apiKey))
  return {
    url,
    port,
    adminKey: apiKey,
    dataDir,
    hostPid,
    stderr: () => err,
    nextHostPid,
    supervisor,
    asTestHost: { dataDir: join(dataDir, 'data'), stateDir: `/run/${tag}`, cgroupParent: tag },
  }
}

let server: Server
let keyA: string
let keyB: string

async function api(key: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
}

async function newKey(name: string, format?: 'e2b'): Promise<string> {
  const res = await api(server.adminKey, 'POST', '/v1/keys', { name, ...(format ? { format } : {}) })
  assert.equal(res.status, 201)
  return ((await res.json()) as { key: string }).key
}

const conn = (apiKey: string) => ({ url: server.url, apiKey })

/** The host is the process it was, logged nothing uncaught, and answers. */
async function stillServing(): Promise<void> {
  process.kill(server.hostPid, 0)
  assert.doesNotMatch(server.stderr(), /uncaught error|unhandled rejection/)
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200)
}

before(async () => {
  server = await startServer()
  keyA = await newKey('tenant-a')
  keyB = await newKey('tenant-b')
})

after(async () => {
  if (!server) return
  if (server.supervisor.exitCode === null && server.supervisor.signalCode === null) {
    server.supervisor.kill('SIGTERM')
    await new Promise((r) => server.supervisor.once('exit', r))
  }
  await until('the host process to exit', () => {
    try {
      process.kill(server.hostPid, 0)
      return undefined
    } catch {
      return true
    }
  })
  assert.deepEqual(leftovers(server.asTestHost as TestHost), NOTHING_LEFT)
  rmSync(server.dataDir, { recursive: true, force: true })
  rmSync(server.asTestHost.stateDir, { recursive: true, force: true })
})

/** A raw HTTP request to the exposed-port origin `host` (the server is reached on loopback). */
function portRequest(
  host: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, headers: { ...headers, host } }, (res) => {
      let body = ''
      res.on('data', (d) => {
        body += d
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** Starts `code` (a python server on `port`) in the sandbox and waits until the proxy reaches it. */
async function serve(sbx: Sandbox, port: number, code: string, key: string): Promise<void> {
  await sbx.files.write('/work/server.py', code)
  await sbx.exec('setsid python3 /work/server.py > /work/server.log 2>&1 < /dev/null &')
  await until(
    'the sandbox server',
    async () => {
      const r = await portRequest(sbx.getHost(port), '/', { 'x-api-key': key }).catch(() => null)
      return r && r.status !== 502 && r.status !== 503 ? true : undefined
    },
    30_000,
  )
}

/** Answers every request with a reason phrase Node refuses to write, and a cookie for every sandbox. */
const BAD_REASON = `
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8080)); s.listen(16)
def run(c):
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        d = c.recv(4096)
        if not d: return c.close()
        data += d
    body = b"hello"
    c.sendall(b"HTTP/1.1 200 O\\x7fK\\r\\nContent-Length: 5\\r\\nSet-Cookie: evil=1; Domain=localhost; Path=/\\r\\n"
              b"Set-Cookie: mine=1; Path=/\\r\\nService-Worker-Allowed: /\\r\\nConnection: close\\r\\n\\r\\n" + body)
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=run, args=(c,), daemon=True).start()
`

describe('one tenant cannot crash the platform', () => {
  it('a text frame that is not JSON on a terminal is answered, not fatal', async () => {
    await using sbx = await Sandbox.create(conn(keyA))
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/sandboxes/${sbx.id}/pty`, {
      headers: { authorization: `Bearer ${keyA}` },
    })
    const messages: string[] = []
    ws.on('message', (d, binary) => {
      if (!binary) messages.push(String(d))
    })
    await new Promise((resolve, reject) => {
      ws.once('open', resolve)
      ws.once('error', reject)
    })
    ws.send(JSON.stringify({ type: 'start', cols: 80, rows: 24 }))
    await until('the terminal to start', () => (messages.some((m) => m.includes('"started"')) ? true : undefined))
    ws.send('this is not json')
    ws.send('{"type":"kill","signal":"__class__"}')
    await until('an error answer', () => (messages.some((m) => m.includes('VALIDATION_FAILED')) ? true : undefined))
    // the terminal itself is still there
    ws.send(Buffer.from('echo still-$((6*7))\n'))
    const seen: Buffer[] = []
    ws.on('message', (d, binary) => {
      if (binary) seen.push(d as Buffer)
    })
    await until('the terminal to answer', () => (Buffer.concat(seen).includes('still-42') ? true : undefined), 15_000)
    ws.close()
    await stillServing()
  })

  it("a sandbox server's malformed reason phrase is not fatal; its cookies cannot reach other origins", async () => {
    await using sbx = await Sandbox.create({ ...conn(keyA), network: { ports: [8080] } })
    await serve(sbx, 8080, BAD_REASON, keyA)
    const res = await portRequest(sbx.getHost(8080), '/', { 'x-api-key': keyA })
    assert.equal(res.status, 200)
    assert.equal(res.body, 'hello')
    // its own origin: a host-only cookie is kept; one for the parent domain (every sandbox) is not
    assert.deepEqual(res.headers['set-cookie'], ['mine=1; Path=/'])
    await stillServing()
  })

  it('the path route on the shared origin is off unless the operator turns it on', async () => {
    await using sbx = await Sandbox.create({ ...conn(keyA), network: { ports: [8080] } })
    const res = await fetch(`${server.url}/s/${sbx.id}/8080/`, { headers: { 'x-api-key': keyA } })
    assert.equal(res.status, 404)
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'NOT_FOUND')
  })
})

describe('another tenant is refused everywhere', () => {
  const SECRET = 'tenant-a-secret-7f3e'
  let a: Sandbox
  let b: Sandbox

  before(async () => {
    a = await Sandbox.create({ ...conn(keyA), envs: { SECRET }, network: { ports: [8080] } })
    b = await Sandbox.create({ ...conn(keyB), network: { ports: [8080] } })
    await a.files.write('/work/secret.txt', SECRET)
  })
  after(async () => {
    await a?.kill()
    await b?.kill()
  })

  it("every forkbox route given A's sandbox id refuses B's key", async () => {
    const spec = (await (await api(keyA, 'GET', '/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    let walked = 0
    for (const [template, methods] of Object.entries(spec.paths)) {
      if (!template.includes('{id}')) continue
      for (const method of Object.keys(methods)) {
        const path = template.replace('{id}', a.id).replace(/\{[^}]+\}/g, '1')
        const ctl = new AbortController()
        const timer = setTimeout(() => ctl.abort(), 10_000)
        const res = await fetch(`${server.url}${path}`, {
          method: method.toUpperCase(),
          headers: { authorization: `Bearer ${keyB}`, 'content-type': 'application/json' },
          body: ['post', 'put', 'patch'].includes(method) ? '{}' : undefined,
          signal: ctl.signal,
        })
        const text = await res.text()
        clearTimeout(timer)
        walked++
        assert.ok(res.status >= 400 && res.status < 500, `${method} ${path} answered B ${res.status}: ${text}`)
        assert.ok(!text.includes(SECRET), `${method} ${path} leaked A's data to B`)
        if (res.status === 404 && template.startsWith('/v1/sandboxes/{id}'))
          assert.match(text, /SANDBOX_NOT_FOUND|NOT_FOUND/, `${method} ${path}: ${text}`)
      }
    }
    assert.ok(walked >= 25, `only ${walked} routes walked`)
    // lists never show another key's sandboxes
    const listed = (await (await api(keyB, 'GET', '/v1/sandboxes')).json()) as { sandboxes: { id: string }[] }
    assert.deepEqual(
      listed.sandboxes.map((s) => s.id),
      [b.id],
    )
    assert.equal((await api(keyB, 'GET', '/v1/sandboxes?owner=*')).status, 403)
  })

  it("every E2B route (control plane, envd, interpreter) refuses B's key and B's token at A's sandbox", async () => {
    const routes = e2bApi({ maxJsonBodyBytes: 1024, maxUploadBytes: 1024 }).routes.filter((r) => r.method !== 'ALL')
    // B's own envd token (for B's sandbox), as E2B clients get it
    const bInfo = await fetch(`${server.url}/sandboxes/${b.id}`, { headers: { 'x-api-key': keyB } })
    const bToken = ((await bInfo.json()) as { envdAccessToken: string }).envdAccessToken
    assert.ok(bToken)
    const e2bB = await newKey('tenant-b-e2b', 'e2b')
    let walked = 0
    for (const r of routes) {
      if (r.path === '/sandboxes' || r.path === '/v2/sandboxes' || r.path === '/snapshots') continue
      if (r.path === '/templates/:id') continue
      const path = r.path.replace(':id', a.id)
      const credentials: Record<string, string>[] = [
        { 'x-api-key': e2bB },
        { 'x-access-token': bToken },
        { 'x-api-key': keyB },
      ]
      for (const creds of credentials) {
        // server streams (envd's Process Start and Connect, Filesystem WatchDir) end with their error in the stream
        const streaming = /(Process\/(Start|Connect)|Filesystem\/WatchDir)$/.test(path)
        const body = streaming
          ? Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from('{}')])
          : r.method === 'GET' || r.method === 'DELETE'
            ? undefined
            : '{}'
        const res = await fetch(`${server.url}${path}${path === '/files' ? '?path=/work/secret.txt' : ''}`, {
          method: r.method,
          headers: {
            ...creds,
            'e2b-sandbox-id': a.id,
            'content-type': streaming ? 'application/connect+json' : 'application/json',
            'connect-protocol-version': '1',
          },
          body,
        })
        const text = await res.text()
        walked++
        assert.ok(!text.includes(SECRET), `${r.method} ${path} leaked A's data`)
        if (streaming) assert.match(text, /"error"/, `${r.method} ${path} streamed to B: ${text}`)
        // 501: a route forkbox does not serve, for anyone
        else
          assert.ok(
            (res.status >= 400 && res.status < 500) || res.status === 501,
            `${r.method} ${path} answered B ${res.status}: ${text}`,
          )
      }
    }
    assert.ok(walked >= 60, `only ${walked} calls walked`)
  })

  it("B cannot attach to, type into, resize or kill A's E2B terminal", async () => {
    const e2bA = await newKey('tenant-a-e2b', 'e2b')
    const e2bB = await newKey('tenant-b-e2b2', 'e2b')
    const { Sandbox: E2B } = await import('e2b')
    const opts = { apiUrl: server.url, sandboxUrl: server.url }
    const sbx = await E2B.create({ ...opts, apiKey: e2bA, envs: { SECRET } })
    try {
      let seen = ''
      const term = await sbx.pty.create({
        cols: 80,
        rows: 24,
        onData: (d) => {
          seen += new TextDecoder().decode(d)
        },
      })
      const call = (method: string, body: unknown) =>
        fetch(`${server.url}/process.Process/${method}`, {
          method: 'POST',
          headers: { 'x-api-key': e2bB, 'e2b-sandbox-id': sbx.sandboxId, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      const input = Buffer.from('touch /tmp/pwned\n').toString('base64')
      for (const [method, body] of [
        ['SendInput', { process: { pid: term.pid }, input: { pty: input } }],
        ['Update', { process: { pid: term.pid }, pty: { size: { cols: 10, rows: 10 } } }],
        ['SendSignal', { process: { pid: term.pid }, signal: 'SIGNAL_SIGKILL' }],
        ['List', {}],
      ] as const) {
        const res = await call(method, body)
        assert.ok(res.status >= 400, `${method} answered B ${res.status}`)
      }
      await assert.rejects(E2B.connect(sbx.sandboxId, { ...opts, apiKey: e2bB }))
      // A's terminal is untouched: alive, and nothing B typed ran
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "CLEAN-$((1+1))"\n'))
      await until('the terminal to answer', () => (seen.includes('CLEAN-2') ? true : undefined), 15_000)
      const typed = await sbx.commands.run('test -e /tmp/pwned && echo typed || echo clean')
      assert.equal(typed.stdout.trim(), 'clean')
      await term.kill()
    } finally {
      await sbx.kill()
    }
  })

  it("B's WebSocket terminal and exposed-port requests at A's sandbox are refused", async () => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/sandboxes/${a.id}/pty`, {
      headers: { authorization: `Bearer ${keyB}` },
    })
    const closed = new Promise<string>((resolve) => {
      let text = ''
      ws.on('message', (d) => {
        text += String(d)
      })
      ws.on('close', () => resolve(text))
      ws.on('error', () => resolve(text))
    })
    ws.on('open', () => ws.send(JSON.stringify({ type: 'start', cols: 80, rows: 24, cmd: 'echo $SECRET' })))
    const text = await closed
    assert.match(text, /SANDBOX_NOT_FOUND/)
    assert.ok(!text.includes(SECRET))
    const host = a.getHost(8080)
    assert.equal((await portRequest(host, '/', { 'x-api-key': keyB })).status, 404)
    assert.equal((await portRequest(host, '/', { 'x-forkbox-access-token': b.accessToken })).status, 404)
    assert.equal((await portRequest(host, `/?forkbox_token=${b.accessToken}`)).status, 404)
    await stillServing()
  })
})

describe('secrets at rest and revoked keys', () => {
  it('the data dir is 0700; the database, server secret and snapshot images are 0600', async () => {
    await using sbx = await Sandbox.create(conn(keyA))
    await sbx.exec('echo in-memory > /tmp/x')
    const snap = await sbx.snapshot()
    const data = server.asTestHost.dataDir
    assert.equal(statSync(data).mode & 0o777, 0o700)
    for (const f of ['forkbox.db', 'forkbox.db-wal', 'server.secret'])
      assert.equal(statSync(join(data, f)).mode & 0o777, 0o600, f)
    const images = join(data, 'snapshots', snap.id)
    assert.equal(statSync(images).mode & 0o777, 0o700)
    const files = readdirSync(images)
    assert.ok(files.length > 0)
    for (const f of files) assert.equal(statSync(join(images, f)).mode & 0o777, 0o600, f)
    // nothing in the database opens a sandbox: its port token is not stored
    const db = readFileSync(join(data, 'forkbox.db')).toString('latin1')
    const wal = readFileSync(join(data, 'forkbox.db-wal')).toString('latin1')
    assert.ok(!db.includes(sbx.accessToken) && !wal.includes(sbx.accessToken))
    await api(keyA, 'DELETE', `/v1/snapshots/${snap.id}`)
  })

  it("a revoked key's port token stops working at once; the admin lists and kills its sandboxes", async () => {
    const keyC = await newKey('tenant-c')
    const sbx = await Sandbox.create({ ...conn(keyC), network: { ports: [8080] } })
    await serve(sbx, 8080, BAD_REASON, keyC)
    const host = sbx.getHost(8080)
    assert.equal((await portRequest(host, '/', { 'x-forkbox-access-token': sbx.accessToken })).status, 200)
    const keys = (await (await api(server.adminKey, 'GET', '/v1/keys')).json()) as {
      keys: { id: string; prefix: string }[]
    }
    const idC = keys.keys.find((k) => keyC.startsWith(k.prefix))?.id as string
    assert.equal((await api(server.adminKey, 'DELETE', `/v1/keys/${idC}`)).status, 204)
    assert.equal((await portRequest(host, '/', { 'x-forkbox-access-token': sbx.accessToken })).status, 404)
    const all = (await (await api(server.adminKey, 'GET', '/v1/sandboxes?owner=*&state=running')).json()) as {
      sandboxes: { id: string }[]
    }
    assert.ok(all.sandboxes.some((s) => s.id === sbx.id))
    assert.equal((await api(server.adminKey, 'DELETE', `/v1/sandboxes/${sbx.id}`)).status, 204)
    const gone = (await (await api(server.adminKey, 'GET', `/v1/sandboxes/${sbx.id}`)).json()) as { state: string }
    assert.equal(gone.state, 'killed')
  })
})

describe('the supervisor', () => {
  it('starts the host again if it dies, and the sandboxes it ran are re-attached', async () => {
    await using sbx = await Sandbox.create(conn(keyA))
    await sbx.files.write('/work/kept.txt', 'kept')
    const from = server.stderr().length
    process.kill(server.hostPid, 'SIGKILL')
    server.hostPid = await server.nextHostPid(from)
    await until(
      'the restarted host',
      async () => ((await fetch(`${server.url}/healthz`).catch(() => null))?.status === 200 ? true : undefined),
      120_000,
    )
    const r = await sbx.exec(['cat', '/work/kept.txt'])
    assert.equal(r.stdout, 'kept')
  })

  it('the host stops (and cleans up) when its supervisor is killed, rather than living on orphaned', async () => {
    server.supervisor.kill('SIGKILL')
    await until(
      'the orphaned host to stop',
      () => {
        try {
          process.kill(server.hostPid, 0)
          return undefined
        } catch {
          return true
        }
      },
      60_000,
    )
    assert.match(server.stderr(), /the supervisor is gone/)
  })
})
