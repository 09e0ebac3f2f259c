// Network isolation on real runsc: test hosts live in a network namespace this test makes (on
// 203.0.113.0/24, a private 10.77.x block, and 169.254.169.254 standing in for cloud metadata);
// the platform's resolver asks a DNS server of this test on loopback. No outside address is used.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import type { Duplex } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'
import { startTestDns, startTestNamespace } from './stand-ins.ts'

const tag = process.pid % 10000
const NS = `fbxt-${tag}`
const HOST_IF = `fbxt${tag}h`
const PUBLIC_A = '203.0.113.10'
const PUBLIC_B = '203.0.113.20'
const PRIVATE = `10.77.${tag % 250}.10`
const METADATA = '169.254.169.254'
const PORT = 8080
const MINING_PORT = 3333

// the names the test's DNS server knows
const NAMES: Record<string, string[]> = {
  'allowed.test': [PUBLIC_A],
  'denied.test': [PUBLIC_B],
  'other.test': [PUBLIC_B],
  'rebind.test': [METADATA, PRIVATE],
}

const dns = await startTestDns(NAMES)
const dnsPort = dns.port

const SERVER = `
import socket, threading, sys
def serve(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        def handle(c=c):
            try:
                c.settimeout(5)
                data = c.recv(65536)
                while data and b"\\r\\n\\r\\n" not in data:
                    data += c.recv(65536)
                n = 0
                for line in data.split(b"\\r\\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                body = data.split(b"\\r\\n\\r\\n", 1)[1]
                while len(body) < n:
                    body += c.recv(65536)
                me = c.getsockname()[0]
                out = ("reached %s:%d got %d" % (me, port, len(body))).encode()
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % len(out) + out)
            except Exception:
                pass
            finally:
                c.close()
        threading.Thread(target=handle, daemon=True).start()
for p in (${PORT}, ${MINING_PORT}):
    threading.Thread(target=serve, args=(p,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
`

/** Run in a sandbox: POSTs `size` bytes to http://host:port/ and prints "ok <reply>" or "refused <why>". */
const PROBE = `
import socket, sys
host, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0
try:
    if not host[0].isdigit():
        host = socket.gethostbyname(host)
    s = socket.create_connection((host, port), timeout=4)
    s.sendall(b"POST / HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n" % size + b"x" * size)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print("ok", data.split(b"\\r\\n\\r\\n", 1)[1].decode())
except Exception as e:
    print("refused", type(e).__name__, e)
`

let testHosts: { stop(): Promise<void> } | undefined

async function makeTestHosts(): Promise<void> {
  testHosts = await startTestNamespace({
    ns: NS,
    hostIf: HOST_IF,
    addresses: [`${PUBLIC_A}/24`, `${PUBLIC_B}/24`, `${PRIVATE}/32`, `${METADATA}/32`],
    routes: [PRIVATE, METADATA],
    python: SERVER,
  })
}

async function removeTestHosts(): Promise<void> {
  await testHosts?.stop()
}

/** From the host itself, so a refusal in a sandbox is the rules', not a dead test server. */
function hostGet(ip: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: ip, port, method: 'POST', path: '/', timeout: 4000 }, (res) => {
      let body = ''
      res.on('data', (c) => {
        body += c
      })
      res.on('end', () => resolve(body))
    })
    req.on('error', reject)
    req.end()
  })
}

async function probe(sbx: Sandbox, host: string, port = PORT, size = 0): Promise<string> {
  const r = await sbx.exec(['python3', '-c', PROBE, host, String(port), String(size)], { timeoutSeconds: 30 })
  return r.stdout.trim()
}

async function addressOf(sbx: Sandbox): Promise<string> {
  const r = await sbx.exec([
    'python3',
    '-c',
    'import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(("203.0.113.1", 9)); print(u.getsockname()[0])',
  ])
  return r.stdout.trim()
}

describe('network isolation', () => {
  const host = useTestHost({
    options: () => ({ dnsUpstreams: [`127.0.0.1:${dnsPort}`] }),
    // after the host started: its "own networks" are read at start, and these are other hosts
    setup: makeTestHosts,
    teardown: removeTestHosts,
  })
  after(() => dns.close())
  let open: Sandbox
  before(async () => {
    open = await Sandbox.create({ ...host().conn, network: { internet: true } })
  })

  it('the test hosts answer the host itself (so refusals below are the rules)', async () => {
    for (const ip of [PUBLIC_A, PUBLIC_B, PRIVATE, METADATA])
      assert.match(await hostGet(ip, PORT), new RegExp(`reached ${ip.replaceAll('.', '\\.')}`))
  })

  it('a default sandbox reaches nothing: no test host, no DNS, not the host', async () => {
    await using sbx = await Sandbox.create(host().conn)
    assert.deepEqual(sbx.info.network, { internet: false, allowOut: [], denyOut: [], ports: [] })
    assert.match(await probe(sbx, PUBLIC_A), /^refused/)
    assert.match(await probe(sbx, 'allowed.test'), /^refused gaierror/)
    assert.match(await probe(sbx, '203.0.113.1', host().host.port), /^refused/)
    // a lookup fails at once (the resolver refuses it), not after glibc's retries; its own name resolves
    const timed = await sbx.exec([
      'python3',
      '-c',
      `import socket, time
t = time.monotonic()
try: socket.getaddrinfo("example.com", 80)
except socket.gaierror: pass
print(round((time.monotonic() - t) * 1000), socket.gethostbyname(socket.gethostname()))`,
    ])
    const [ms, own] = timed.stdout.trim().split(' ')
    assert.ok(Number(ms) < 500, `a failed lookup took ${ms} ms`)
    assert.equal(own, '127.0.1.1')
    // so a server that looks up its own name at start (getfqdn) listens at once
    const listening = await sbx.exec([
      'python3',
      '-c',
      `import socket, subprocess, sys, time
t = time.monotonic()
server = subprocess.Popen([sys.executable, "-m", "http.server", "8123"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while True:
    try:
        socket.create_connection(("127.0.0.1", 8123), 1).close()
        break
    except OSError:
        time.sleep(0.02)
print(round((time.monotonic() - t) * 1000))
server.kill()`,
    ])
    assert.ok(Number(listening.stdout) < 1000, `http.server listened after ${listening.stdout.trim()} ms`)
  })

  it('internet: true reaches a public test host by address and by name', async () => {
    assert.equal(await probe(open, PUBLIC_A), `ok reached ${PUBLIC_A}:${PORT} got 0`)
    assert.equal(await probe(open, 'allowed.test'), `ok reached ${PUBLIC_A}:${PORT} got 0`)
  })

  it('always blocked: metadata (even allow-listed), private ranges, the host and its control plane, mining ports', async () => {
    assert.match(await probe(open, METADATA), /^refused/)
    assert.match(await probe(open, PRIVATE), /^refused/)
    assert.match(await probe(open, PUBLIC_A, MINING_PORT), /^refused/)
    const gateway = (await addressOf(open)).replace(/\.\d+$/, (m) => `.${Number(m.slice(1)) - 1}`)
    for (const ip of [gateway, '203.0.113.1', '192.0.2.2'])
      assert.match(await probe(open, ip, host().host.port), /^refused/, `control plane via ${ip}`)
    await using listed = await Sandbox.create({
      ...host().conn,
      network: { internet: true, allowOut: [METADATA, '169.254.0.0/16', PUBLIC_A] },
    })
    assert.match(await probe(listed, METADATA), /^refused/)
    assert.match(await probe(listed, PUBLIC_A), /^ok/)
  })

  it('allowOut narrows and denyOut refuses, by CIDR and by name; a name cannot be rebound onto blocked addresses', async () => {
    await using narrow = await Sandbox.create({ ...host().conn, network: { internet: true, allowOut: [PUBLIC_A] } })
    assert.match(await probe(narrow, PUBLIC_A), /^ok/)
    assert.match(await probe(narrow, PUBLIC_B), /^refused/)
    await using denied = await Sandbox.create({
      ...host().conn,
      network: { internet: true, denyOut: [`${PUBLIC_B}/32`, 'denied.test'] },
    })
    assert.match(await probe(denied, PUBLIC_A), /^ok/)
    assert.match(await probe(denied, PUBLIC_B), /^refused/)
    assert.match(await probe(denied, 'denied.test'), /^refused gaierror/)
    await using byName = await Sandbox.create({
      ...host().conn,
      network: { internet: true, allowOut: ['allowed.test', 'rebind.test'] },
    })
    assert.match(await probe(byName, 'allowed.test'), /^ok reached 203\.0\.113\.10/)
    // other.test resolves (to PUBLIC_B) but is not allowed; rebind.test's blocked addresses are stripped
    assert.match(await probe(byName, 'other.test'), /^refused/)
    assert.match(await probe(byName, PUBLIC_B), /^refused/)
    assert.match(await probe(byName, 'rebind.test'), /^refused gaierror/)
    // dropping a name rule closes what was opened through it, even to a sandbox that cached the address
    await byName.updateNetwork({ allowOut: ['rebind.test'] })
    assert.match(await probe(byName, PUBLIC_A), /^refused/)
  })

  it('updateNetwork takes effect on a running sandbox, and changes only what it is given', async () => {
    await using sbx = await Sandbox.create(host().conn)
    assert.match(await probe(sbx, PUBLIC_A), /^refused/)
    const on = await sbx.updateNetwork({ internet: true, ports: [8000] })
    assert.deepEqual(on.network, { internet: true, allowOut: [], denyOut: [], ports: [8000] })
    assert.match(await probe(sbx, PUBLIC_A), /^ok/)
    const narrowed = await sbx.updateNetwork({ allowOut: [PUBLIC_B] })
    assert.deepEqual(narrowed.network, { internet: true, allowOut: [PUBLIC_B], denyOut: [], ports: [8000] })
    assert.match(await probe(sbx, PUBLIC_A), /^refused/)
    assert.match(await probe(sbx, PUBLIC_B), /^ok/)
    await sbx.updateNetwork({ internet: false })
    assert.match(await probe(sbx, PUBLIC_B), /^refused/)
    await assert.rejects(sbx.updateNetwork({ allowOut: ['not a rule!'] }), { code: 'VALIDATION_FAILED' })
    await assert.rejects(sbx.updateNetwork({ internet: false, allowOut: [PUBLIC_A] }), { code: 'VALIDATION_FAILED' })
    assert.deepEqual((await sbx.getInfo()).network.allowOut, [PUBLIC_B])
  })

  it('an open connection the new policy refuses is cut; one it still allows goes on', async () => {
    // connects, sends half a request, waits for /tmp/go-N, sends the rest and prints the outcome
    const half = `
import socket, os, sys, time
s = socket.create_connection(("${PUBLIC_A}", ${PORT}), timeout=10)
s.sendall(b"POST / HTTP/1.1\\r\\nHost: x\\r\\n")
open(sys.argv[1] + ".connected", "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
try:
    s.sendall(b"Content-Length: 0\\r\\n\\r\\n")
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    print("reply" if data else "closed", flush=True)
except Exception as e:
    print("cut", type(e).__name__, flush=True)
`
    await using sbx = await Sandbox.create({ ...host().conn, network: { internet: true } })
    await sbx.files.write('/tmp/half.py', half)
    const run = async (flag: string, change: () => Promise<unknown>) => {
      const proc = await sbx.exec(['python3', '/tmp/half.py', flag], { background: true })
      for (let i = 0; i < 200 && !(await sbx.files.exists(`${flag}.connected`)); i++)
        await new Promise((r) => setTimeout(r, 50))
      await change()
      await sbx.files.write(flag, '')
      let out = ''
      await proc.wait({
        onStdout: (d) => {
          out += d
        },
      })
      return out
    }
    // still allowed: the flow carries on under the new rules
    assert.match(await run('/tmp/go-1', () => sbx.updateNetwork({ denyOut: [PUBLIC_B] })), /reply/)
    // no longer allowed: cut
    assert.match(await run('/tmp/go-2', () => sbx.updateNetwork({ allowOut: [PUBLIC_B] })), /cut|closed/)
  })

  it('a sandbox cannot reach another sandbox', async () => {
    await using target = await Sandbox.create({ ...host().conn, network: { internet: true } })
    await target.exec('setsid python3 -m http.server 8000 > /dev/null 2>&1 < /dev/null &')
    const ip = await addressOf(target)
    assert.notEqual(ip, await addressOf(open))
    // the server is up: the sandbox itself reaches it
    let inside = ''
    for (let i = 0; i < 30 && !inside.startsWith('ok'); i++) inside = await probe(target, '127.0.0.1', 8000)
    assert.match(inside, /^ok/)
    assert.match(await probe(open, ip, 8000), /^refused/)
  })

  it('a fork of a networked sandbox gets its own address and the same policy', async () => {
    await using src = await Sandbox.create({ ...host().conn, network: { internet: true, allowOut: [PUBLIC_A] } })
    const [fork] = await src.fork({ count: 1 })
    assert.ok(fork)
    try {
      assert.deepEqual(fork.info.network, src.info.network)
      assert.notEqual(await addressOf(fork), await addressOf(src))
      assert.match(await probe(fork, PUBLIC_A), /^ok/)
      assert.match(await probe(fork, PUBLIC_B), /^refused/)
      // the original keeps its network through the snapshot the fork was made from
      assert.match(await probe(src, PUBLIC_A), /^ok/)
    } finally {
      await fork.kill()
    }
  })

  it('counts the bytes a sandbox sends and receives', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { internet: true } })
    assert.match(await probe(sbx, PUBLIC_A, PORT, 300_000), /got 300000/)
    const res = await fetch(`${host().conn.url}/metrics`, {
      headers: { authorization: `Bearer ${host().conn.apiKey}` },
    })
    const text = await res.text()
    const value = (name: string) =>
      Number(new RegExp(`^${name}\\{sandbox="${sbx.id}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN)
    assert.ok(value('forkbox_sandbox_network_tx_bytes_total') > 300_000, text.slice(0, 200))
    assert.ok(value('forkbox_sandbox_network_rx_bytes_total') > 0)
  })
})

describe('exposed ports', () => {
  const host = useTestHost()

  it('a server in the sandbox is reachable at getHost(port) with the key or the access token, not without', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { ports: [8000] } })
    await sbx.files.write('/work/hello.txt', 'hello from the sandbox')
    await sbx.exec('cd /work && setsid python3 -m http.server 8000 > /dev/null 2>&1 < /dev/null &')
    const url = `http://${sbx.getHost(8000)}/hello.txt`
    let withKey: Response | undefined
    for (let i = 0; i < 50; i++) {
      withKey = await fetch(url, { headers: { 'x-api-key': host().conn.apiKey } })
      if (withKey.status === 200) break
      await new Promise((r) => setTimeout(r, 100))
    }
    assert.equal(withKey?.status, 200)
    assert.equal(await withKey?.text(), 'hello from the sandbox')
    const none = await fetch(url)
    assert.equal(none.status, 401)
    assert.equal(((await none.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED')
    const wrong = await fetch(url, { headers: { 'x-forkbox-access-token': 'fbt_nope' } })
    assert.equal(wrong.status, 404)
    const token = await fetch(url, { headers: { 'x-forkbox-access-token': sbx.accessToken } })
    assert.equal(await token.text(), 'hello from the sandbox')
    // a browser: the token once in the query, then the cookie it set
    const first = await fetch(`${url}?forkbox_token=${sbx.accessToken}`)
    assert.equal(first.status, 200)
    const cookie = first.headers.get('set-cookie')?.split(';')[0] ?? ''
    assert.equal((await fetch(url, { headers: { cookie } })).status, 200)
    // ports are closed unless listed
    const closed = await fetch(`http://${sbx.getHost(8001)}/`, { headers: { 'x-api-key': host().conn.apiKey } })
    assert.equal(closed.status, 404)
    assert.equal(((await closed.json()) as { error: { code: string } }).error.code, 'PORT_NOT_EXPOSED')
    // another key's caller does not learn it exists
    const other = await fetch(`${host().conn.url}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${host().conn.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'other' }),
    })
    const otherKey = ((await other.json()) as { key: string }).key
    assert.equal((await fetch(url, { headers: { 'x-api-key': otherKey } })).status, 404)
  })

  it('upgrades (WebSocket and the like) pass through to the sandbox', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { ports: [9100] } })
    const socket = await openEcho(sbx, host().conn.apiKey)
    assert.equal(await roundTrip(socket, 'ping'), 'PING')
    socket.destroy()
  })
})

describe('exposed ports and the idle reaper', () => {
  const host = useTestHost({ options: () => ({ idleTimeoutSeconds: 2 }) })

  it('an open upgraded connection keeps the sandbox from idling; once it closes the sandbox hibernates', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { ports: [9100] } })
    const socket = await openEcho(sbx, host().conn.apiKey)
    await new Promise((r) => setTimeout(r, 5000))
    assert.equal((await sbx.getInfo()).state, 'running')
    assert.equal(await roundTrip(socket, 'still here'), 'STILL HERE')
    socket.destroy()
    let state = ''
    for (let i = 0; i < 40 && state !== 'hibernated'; i++) {
      await new Promise((r) => setTimeout(r, 250))
      state = (await sbx.getInfo()).state
    }
    assert.equal(state, 'hibernated')
  })
})

/** Answers any upgrade with 101, then echoes in upper case. */
const ECHO = `
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 9100)); s.listen(8)
def run(c):
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        data += c.recv(4096)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n")
    rest = data.split(b"\\r\\n\\r\\n", 1)[1]
    if rest: c.sendall(rest)
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d.upper())
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=run, args=(c,), daemon=True).start()
`

/** Starts ECHO in the sandbox on port 9100 and opens an upgraded connection to it through the proxy. */
async function openEcho(sbx: Sandbox, apiKey: string): Promise<Duplex> {
  await sbx.files.write('/work/echo.py', ECHO)
  await sbx.exec('setsid python3 /work/echo.py > /dev/null 2>&1 < /dev/null &')
  const [h, p] = sbx.getHost(9100).split(':')
  for (let i = 0; i < 50; i++) {
    const socket = await new Promise<Duplex | null>((resolve) => {
      const req = request({
        host: h,
        port: Number(p),
        path: '/socket',
        headers: { connection: 'Upgrade', upgrade: 'echo', 'x-api-key': apiKey },
      })
      req.on('upgrade', (_res, s) => resolve(s))
      req.on('response', () => resolve(null))
      req.on('error', () => resolve(null))
      req.end()
    })
    if (socket) return socket
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the echo server never answered through the proxy')
}

function roundTrip(socket: Duplex, text: string): Promise<string> {
  return new Promise((resolve) => {
    socket.once('data', (d) => resolve(String(d)))
    socket.write(text)
  })
}
