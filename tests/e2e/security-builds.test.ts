// Template builds as a hostile tenant would use them, on real runsc: registry pulls that name the
// host's loopback, private or link-local addresses (directly, through DNS, or through a registry's
// token realm), a RUN step that writes past the template's disk or the key's quota, and a
// no-network key's build step trying to connect out. The stand-ins live on loopback and in a
// network namespace this test makes (203.0.113.0/24, a private 10.77.x address and 169.254.169.254
// standing in for cloud metadata); the platform's resolver asks this test's DNS server. No outside
// address is used.
import assert from 'node:assert/strict'
import { statfsSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { followBuild, sharedTemplatesDir, useTestHost } from './harness.ts'
import { startTestDns, startTestNamespace } from './stand-ins.ts'

const tag = (process.pid + 7) % 10000
const NS = `fbxb-${tag}`
const HOST_IF = `fbxb${tag}h`
/** A registry on a public address (reachable from the pull network): its token realm points at metadata. */
const REGISTRY_A = '203.0.113.30'
/** Another: its token realm points at the host's loopback. */
const REGISTRY_B = '203.0.113.40'
const PRIVATE = `10.78.${tag % 250}.10`
const METADATA = '169.254.169.254'
const PORT = 5000
const MiB = 1024 * 1024

// the names the test's DNS server knows
const NAMES: Record<string, string[]> = {
  'registry-a.test': [REGISTRY_A],
  'registry-b.test': [REGISTRY_B],
  'rebind.test': [METADATA, PRIVATE],
}

const dns = await startTestDns(NAMES)
const dnsPort = dns.port

/** What reached the loopback stand-in (the control plane's port would be such a target). */
const loopbackHits: string[] = []
const loopback: Server = createServer((req, res) => {
  loopbackHits.push(`${req.method} ${req.url}`)
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"from-loopback"}')
})
await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', () => r()))
const loopbackPort = (loopback.address() as AddressInfo).port

/**
 * The stand-ins in the test's namespace, one server on every address: the registries answer
 * /v2/ with a token realm (A's at metadata, B's at the host's loopback); metadata and the private
 * address answer anything with a "credential". Every request is printed: `HIT <address> <path>`.
 */
const SERVER = `
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        me = self.connection.getsockname()[0]
        print("HIT", me, self.path, flush=True)
        if me in ("${REGISTRY_A}", "${REGISTRY_B}") and self.path.startswith("/v2/"):
            realm = "http://${METADATA}:${PORT}/latest/meta-data/iam/security-credentials/role" if me == "${REGISTRY_A}" else "http://127.0.0.1:${loopbackPort}/token"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="%s",service="registry",scope="repository:app:pull"' % realm)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"token":"AKIA-stand-in","Code":"Success"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    do_HEAD = do_GET
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
srv = S(("0.0.0.0", ${PORT}), H)
print("ready", flush=True)
srv.serve_forever()
`

const hits: string[] = []
let standIns: { stop(): Promise<void> } | undefined

async function makeStandIns(): Promise<void> {
  standIns = await startTestNamespace({
    ns: NS,
    hostIf: HOST_IF,
    addresses: [`${REGISTRY_A}/24`, `${REGISTRY_B}/24`, `${PRIVATE}/32`, `${METADATA}/32`],
    routes: [PRIVATE, METADATA],
    python: SERVER,
    onLine: (l) => {
      if (l.startsWith('HIT ')) hits.push(l.slice(4))
    },
  })
}

async function removeStandIns(): Promise<void> {
  await standIns?.stop()
}

const host = useTestHost({
  options: () => ({
    dnsUpstreams: [`127.0.0.1:${dnsPort}`],
    // plain HTTP to the stand-in registries (what makes them registries at all); NOT allow-listed
    insecureRegistries: [
      `registry-a.test:${PORT}`,
      `registry-b.test:${PORT}`,
      `${REGISTRY_A}:${PORT}`,
      `${REGISTRY_B}:${PORT}`,
    ],
    poolSize: 0,
  }),
  // after the host started: its "own networks" are read at start, and these are other hosts
  setup: makeStandIns,
  teardown: removeStandIns,
})
after(async () => {
  dns.close()
  await new Promise((r) => loopback.close(r))
})

async function call(method: string, path: string, body?: unknown, key?: string) {
  const { url, apiKey } = host().conn
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key ?? apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, unknown> | null }
}

async function newKey(name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await call('POST', '/v1/keys', { name, ...extra })
  assert.equal(r.status, 201, JSON.stringify(r.body))
  return (r.body as { key: string }).key
}

/** Starts a build and follows its log to the end: the log's lines and the build as it ended. */
async function build(key: string, req: Record<string, unknown>): ReturnType<typeof followBuild> {
  const r = await call('POST', '/v1/templates', req, key)
  assert.equal(r.status, 202, JSON.stringify(r.body))
  return followBuild(host().conn.url, key, (r.body as { build: { id: string } }).build.id)
}

const nonce = `${process.pid}-${Date.now()}`
let tenant = ''

describe('template builds cannot reach the host, fill its disk, or leave a no-network key', () => {
  before(async () => {
    tenant = await newKey('build-tenant')
  })

  it('the stand-ins answer the host itself (so what the pulls do not reach is the rules)', async () => {
    for (const ip of [REGISTRY_A, PRIVATE, METADATA]) {
      const res = await fetch(`http://${ip}:${PORT}/probe`)
      assert.equal(res.status, 200)
    }
    const res = await fetch(`http://127.0.0.1:${loopbackPort}/probe`)
    assert.equal(res.status, 200)
    assert.deepEqual(
      hits.map((h) => h.split(' ')[0]),
      [REGISTRY_A, PRIVATE, METADATA],
    )
    hits.length = 0
    loopbackHits.length = 0
  })

  it('a registry named by a loopback, private or link-local address is refused at once, and is never asked', async () => {
    for (const registry of [
      `127.0.0.1:${loopbackPort}`,
      `localhost:${loopbackPort}`,
      `${PRIVATE}:${PORT}`,
      `${METADATA}:${PORT}`,
    ]) {
      const { build: b } = await build(tenant, { name: `pull-${nonce}`, image: `${registry}/app:1` })
      assert.equal(b.status, 'failed')
      assert.equal(b.error?.code, 'REGISTRY_NOT_ALLOWED', JSON.stringify(b.error))
      assert.match(b.error?.message ?? '', /FORKBOX_REGISTRY_ALLOW/)
    }
    assert.equal(hits.length, 0, JSON.stringify(hits))
    assert.equal(loopbackHits.length, 0, JSON.stringify(loopbackHits))
  })

  it('a registry name that resolves to metadata or a private address reaches neither', async () => {
    const { build: b } = await build(tenant, { name: `pull-${nonce}`, image: `rebind.test:${PORT}/app:1` })
    assert.equal(b.status, 'failed')
    assert.equal(b.error?.code, 'REGISTRY_UNREACHABLE', JSON.stringify(b.error))
    assert.equal(hits.length, 0, JSON.stringify(hits))
  })

  it("a reachable registry's token realm at metadata or at the host's loopback is not followed there", async () => {
    // by address (which the host itself reaches too) and by name (through the sandboxes' resolver)
    for (const [name, registryIp] of [
      [REGISTRY_A, REGISTRY_A],
      [REGISTRY_B, REGISTRY_B],
      ['registry-a.test', REGISTRY_A],
      ['registry-b.test', REGISTRY_B],
    ] as const) {
      const { build: b } = await build(tenant, { name: `pull-${nonce}`, image: `${name}:${PORT}/app:1` })
      assert.equal(b.status, 'failed')
      assert.match(b.error?.code ?? '', /^REGISTRY_/, JSON.stringify(b.error))
      // the pull ran, from the pull network, and reached the registry itself
      assert.ok(
        hits.some((h) => h.startsWith(`${registryIp} /v2/`)),
        `the registry saw no request: ${JSON.stringify(hits)}`,
      )
      // ... and not the realm it named: metadata and the host's loopback saw nothing
      const elsewhere = hits.filter((h) => !h.startsWith(REGISTRY_A) && !h.startsWith(REGISTRY_B))
      assert.deepEqual(elsewhere, [], `pulling from ${name}`)
      assert.equal(loopbackHits.length, 0, `pulling from ${name}: ${JSON.stringify(loopbackHits)}`)
      // what it said answered on the refused address is nothing: no credential, no "unauthorized"
      assert.doesNotMatch(b.error?.message ?? '', /AKIA|from-loopback/)
    }
    hits.length = 0
  })

  it("a RUN writing past the template's diskMB fails naming the step; the host's disk moves by less than the bound", async () => {
    const diskMB = 256
    const freeBefore = freeBytes()
    let lowest = freeBefore
    const sampler = setInterval(() => {
      lowest = Math.min(lowest, freeBytes())
    }, 50)
    let result: Awaited<ReturnType<typeof build>>
    try {
      result = await build(tenant, {
        name: `fill-${nonce}`,
        resources: { diskMB },
        dockerfile: `FROM forkbox:base\nRUN echo ${nonce} && dd if=/dev/zero of=/fill bs=1M count=1500\n`,
      })
    } finally {
      clearInterval(sampler)
    }
    const { build: b, lines } = result
    assert.equal(b.status, 'failed', lines.join('\n'))
    assert.equal(b.error?.code, 'NO_SPACE', JSON.stringify(b.error))
    assert.match(b.error?.message ?? '', /RUN echo .* \(line 2\)/)
    assert.match(b.error?.message ?? '', /diskMB/)
    assert.ok(
      lines.some((l) => /No space left on device/.test(l)),
      lines.join('\n'),
    )
    // the step wrote 1.5 GB without the bound; with it, the host gave at most the bound (and some
    // metadata) while it ran, and has it back now
    const took = freeBefore - lowest
    assert.ok(took < (diskMB + 48) * MiB, `the host's free space fell by ${Math.round(took / MiB)} MiB`)
    assert.ok(freeBefore - freeBytes() < 64 * MiB, 'the scratch disk was given back')
  })

  it("a build past what the key's templateBytes quota leaves fails with QUOTA_EXCEEDED while it writes", async () => {
    const small = await newKey('build-small', { quotas: { templateBytes: 100 * MiB } })
    const { build: b, lines } = await build(small, {
      name: `quota-${nonce}`,
      resources: { diskMB: 1024 },
      dockerfile: `FROM forkbox:base\nRUN echo ${nonce} && dd if=/dev/zero of=/fill bs=1M count=400\n`,
    })
    assert.equal(b.status, 'failed', lines.join('\n'))
    assert.equal(b.error?.code, 'QUOTA_EXCEEDED', JSON.stringify(b.error))
    assert.match(b.error?.message ?? '', /templateBytes/)
    assert.match(b.error?.message ?? '', /\(line 2\)/)
  })

  it("a no-network key's build step reaches nothing; the same step of another key does", async () => {
    const closed = await newKey('build-no-network', { scopes: { noNetwork: true } })
    const probe = `RUN python3 -c "import socket; s = socket.socket(); s.settimeout(4); r = s.connect_ex(('${REGISTRY_A}', ${PORT})); r == 0 and s.sendall(b'GET /from-build HTTP/1.0\\r\\n\\r\\n'); r == 0 and s.recv(100); print('connect', '${nonce}', r)"`
    const dockerfile = (who: string) => `FROM forkbox:base\nRUN echo ${who}-${nonce}\n${probe}\n`
    hits.length = 0
    const shut = await build(closed, { name: `net-${nonce}`, dockerfile: dockerfile('closed') })
    assert.equal(shut.build.status, 'ready', shut.lines.join('\n'))
    const said = shut.lines.find((l) => l.startsWith(`connect ${nonce}`))
    assert.ok(said && !said.endsWith(' 0'), `the closed step connected: ${said}`)
    assert.equal(hits.length, 0, JSON.stringify(hits))
    const open = await build(tenant, { name: `net-${nonce}`, dockerfile: dockerfile('open') })
    assert.equal(open.build.status, 'ready', open.lines.join('\n'))
    assert.ok(open.lines.includes(`connect ${nonce} 0`), open.lines.join('\n'))
    assert.equal(hits.filter((h) => h.startsWith(REGISTRY_A)).length, 1, JSON.stringify(hits))
    for (const [key, name] of [
      [closed, `net-${nonce}`],
      [tenant, `net-${nonce}`],
    ] as const)
      assert.equal((await call('DELETE', `/v1/templates/${name}`, undefined, key)).status, 204)
  })
})

function freeBytes(): number {
  const s = statfsSync(sharedTemplatesDir)
  return s.bavail * s.bsize
}
