// Toward large fleets, without runsc: a control plane on a real Postgres with 1,000 simulated
// hosts (each a real WebSocket peer speaking the agent protocol, all served by this process),
// heartbeating every 2 s, over 100,000 sandbox records; prints create placement p50/p99 and the
// control plane's memory across two rounds of creates (flat: the second round adds < 10 %).
// Not a test.   node --import tsx bench/fleet-sim.ts [--hosts N] [--records N] [--iterations N]
import { timingSafeEqual } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type AgentApi, type HostCapacity, RpcPeer, type StartSandboxSpec } from '@forkbox/protocol'
import { createControlPlane } from '@forkbox/server'
import pg from 'pg'
import { type RawData, WebSocketServer } from 'ws'
import { startPostgres } from '../apps/server/test/postgres.ts'
import { N, printSummary, report } from './lib.ts'

const arg = (name: string, dflt: number) =>
  process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt
const HOSTS = arg('--hosts', 1000)
const RECORDS = arg('--records', 100_000)
const CREATES = Math.max(N, 100)
const TOKEN = 'simulated-fleet-join-token'

const dir = mkdtempSync(join(tmpdir(), 'fbx-sim-'))
const pgsrv = await startPostgres()
const databaseUrl = await pgsrv.database('sim')
writeFileSync(join(dir, 'server.secret'), Buffer.alloc(32, 7))
const cp = await createControlPlane({
  config: {
    dbPath: join(dir, 'db.sqlite'),
    databaseUrl,
    secretPath: join(dir, 'server.secret'),
    joinToken: TOKEN,
    logLevel: 'silent',
    maxSandboxes: 10_000_000,
    hostGraceSeconds: 30,
  },
})
const key = cp.bootstrapKey as string

/** A host with no runsc: it answers the calls a create and the reapers make. */
function simAgent(): Partial<AgentApi> {
  const live = new Set<string>()
  const r = { vcpus: 1, memoryMB: 512, diskMB: 1024, pids: 1024 }
  return {
    templates: async () => [{ name: 'base', description: 'sim', defaults: r, maxima: r, ready: true }],
    ensureTemplate: async () => {},
    registerTemplates: async () => {},
    start: async (spec: StartSandboxSpec) => {
      live.add(spec.id)
    },
    stop: async (id: string) => {
      live.delete(id)
    },
    liveIds: async () => [...live],
    poolSizes: async () => ({ base: 1 }),
    usage: async () => [],
    pruneSnapshots: async () => {},
  }
}

// every simulated host at /h/{n}/ of one server, each with its own credential
const credentials = new Map<number, string>()
const wss = new WebSocketServer({ noServer: true })
const server = createServer()
server.on('upgrade', (req, socket, head) => {
  const m = /^\/h\/(\d+)\/v1\/agent\/rpc$/.exec(req.url ?? '')
  const want = m ? credentials.get(Number(m[1])) : undefined
  const got = Buffer.from(req.headers.authorization ?? '')
  const ok =
    want && got.length === Buffer.byteLength(`Bearer ${want}`) && timingSafeEqual(got, Buffer.from(`Bearer ${want}`))
  if (!ok) {
    socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n')
    return
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    const peer = new RpcPeer({ send: (f) => ws.send(f) }, simAgent() as never)
    ws.on('message', (d: RawData) => peer.receive(d as Buffer))
    ws.on('close', () => peer.close(new Error('closed')))
  })
})
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`

const capacity = (n: number): HostCapacity => ({
  vcpus: 16,
  memoryBytes: 64 * 1024 ** 3,
  diskFreeBytes: 500 * 1024 ** 3,
  maxSandboxes: 500,
  sandboxes: 0,
  templates: ['base'],
  pool: { base: n % 3 === 0 ? 1 : 0 },
})

async function call(path: string, auth: string, body: unknown) {
  return cp.app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

try {
  let t = performance.now()
  for (let n = 0; n < HOSTS; n++) {
    const res = await call('/v1/hosts/join', TOKEN, {
      id: `sim-${n}`,
      url: `${base}/h/${n}/`,
      version: 'sim',
      capacity: capacity(n),
    })
    credentials.set(n, ((await res.json()) as { credential: string }).credential)
  }
  console.log(`${HOSTS} hosts joined in ${Math.round(performance.now() - t)} ms`)

  // the records: RECORDS running sandboxes spread over the hosts, written straight into the store
  t = performance.now()
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  const owner = (await db.query<{ id: string }>('select id from api_keys limit 1')).rows[0]?.id
  const now = new Date().toISOString()
  const later = new Date(Date.now() + 86_400_000).toISOString()
  for (let i = 0; i < RECORDS; i += 5000) {
    const n = Math.min(5000, RECORDS - i)
    await db.query(
      `insert into sandboxes (id, owner, template, state, metadata, resources, created_at, expires_at, network)
       select 'sim-sbx-' || g, $1, 'base', 'running', '{}', '{"vcpus":1,"memoryMB":512,"diskMB":1024,"pids":1024}', $2, $3,
              '{"internet":false,"allowOut":[],"denyOut":[],"ports":[]}'
       from generate_series($4::int, $5::int) g`,
      [owner, now, later, i, i + n - 1],
    )
    await db.query(
      `insert into placements (id, kind, host, vcpus, memory_mb, created_at)
       select 'sim-sbx-' || g, 'sandbox', 'sim-' || (g % ${HOSTS}), 1, 512, $1 from generate_series($2::int, $3::int) g`,
      [now, i, i + n - 1],
    )
  }
  await db.end()
  console.log(`${RECORDS} sandbox records written in ${Math.round(performance.now() - t)} ms`)

  // heartbeats: every host every 2 s, spread over the 2 s
  let beats = 0
  let beatMs = 0
  const heartbeats = setInterval(() => {
    for (let k = 0; k < HOSTS / 20; k++) {
      const n = (beats + k) % HOSTS
      const started = performance.now()
      void call(`/v1/hosts/sim-${n}/heartbeat`, credentials.get(n) ?? '', { capacity: capacity(n) }).then(() => {
        beatMs += performance.now() - started
      })
    }
    beats += HOSTS / 20
  }, 100)

  const round = async () => {
    const xs: number[] = []
    for (let i = 0; i < CREATES; i++) {
      const t0 = performance.now()
      const res = await call('/v1/sandboxes', key, { template: 'base', ttlSeconds: 600 })
      xs.push(performance.now() - t0)
      if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`)
    }
    return xs
  }
  const mem = () => {
    global.gc?.()
    return process.memoryUsage()
  }
  await round() // warm-up: connections to the hosts a create lands on
  const before = mem()
  report(`create (placement + start on a simulated host), ${HOSTS} hosts, ${RECORDS} records`, await round())
  const middle = mem()
  report('create, second round', await round())
  const after = mem()
  clearInterval(heartbeats)
  await new Promise((r) => setTimeout(r, 500))
  const mb = (b: number) => `${Math.round(b / 1024 / 1024)} MiB`
  console.log(`heartbeats handled: ${beats}, mean ${(beatMs / Math.max(1, beats)).toFixed(2)} ms each`)
  console.log(`control plane + simulated hosts, rss: ${mb(before.rss)} → ${mb(middle.rss)} → ${mb(after.rss)}`)
  console.log(`heap used: ${mb(before.heapUsed)} → ${mb(middle.heapUsed)} → ${mb(after.heapUsed)}`)
  const growth = (after.heapUsed - middle.heapUsed) / middle.heapUsed
  console.log(
    `memory over the second round: ${growth < 0.1 ? 'flat' : 'GROWING'} (${(growth * 100).toFixed(1)} % heap)`,
  )
} finally {
  await cp.close()
  server.closeAllConnections()
  server.close()
  await pgsrv.stop()
  rmSync(dir, { recursive: true, force: true })
}
printSummary()
