// A fleet control plane (no agent of its own) over agents served on loopback through the real
// WebSocket transport: joins, heartbeats, placement, routing, cordon, NO_CAPACITY. Fake agents:
// runsc fleets are tested in tests/e2e.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { agentRpcServer, imageSignature as agentSignature } from '@forkbox/agent'
import { AppError, type HostCapacity, type TemplateBuildSpec, uploadOf } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane } from '@forkbox/server'
import { getRequestListener } from '@hono/node-server'
import { FakeAgent } from '../../server/test/fake-agent.ts'

const TOKEN = 'join-token-for-tests-0123'

interface TestHost {
  id: string
  agent: FakeAgent
  server: Server
  url: string
  credential: string | null
  /** Every connection made to it (the agent's WebSockets included), to cut them as a host dying would. */
  sockets: Set<Socket>
}

let dir: string
let cp: ControlPlane
let key: string
let hosts: TestHost[]

async function call(method: string, path: string, body?: unknown, auth: string | null = key) {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (auth) headers.authorization = `Bearer ${auth}`
  const res = await cp.app.request(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

function capacity(over: Partial<HostCapacity> = {}): HostCapacity {
  return {
    vcpus: 2,
    memoryBytes: 8 * 1024 ** 3,
    diskFreeBytes: 10 * 1024 ** 3,
    maxSandboxes: 10,
    sandboxes: 0,
    templates: ['base'],
    pool: {},
    ...over,
  }
}

async function serveHost(id: string): Promise<TestHost> {
  const agent = new FakeAgent()
  const host: TestHost = { id, agent, server: createServer(), url: '', credential: null, sockets: new Set() }
  host.server.on('connection', (socket) => {
    host.sockets.add(socket)
    socket.on('close', () => host.sockets.delete(socket))
  })
  const rpc = agentRpcServer(agent, { credential: () => host.credential })
  host.server.on('upgrade', rpc.upgrade)
  host.server.on('close', () => rpc.close())
  await new Promise<void>((r) => host.server.listen(0, '127.0.0.1', () => r()))
  const addr = host.server.address()
  host.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`
  return host
}

async function joinHost(h: TestHost, cap = capacity()) {
  const r = await call('POST', '/v1/hosts/join', { id: h.id, url: h.url, version: 'test', capacity: cap }, TOKEN)
  assert.equal(r.status, 200, JSON.stringify(r.body))
  h.credential = r.body.credential
  return r
}

async function create(body: Record<string, unknown> = {}) {
  return call('POST', '/v1/sandboxes', { template: 'base', ...body })
}

const hostOf = (id: string) => hosts.find((h) => h.agent.live.has(id))?.id

/** The control plane again, on the same store, with other settings (the hosts' joins carry over). */
async function restartControlPlane(config: { hostGraceSeconds: number }): Promise<void> {
  await cp.close()
  cp = await createControlPlane({
    config: {
      dbPath: join(dir, 'db.sqlite'),
      logLevel: 'silent',
      reaperIntervalMs: 60_000,
      joinToken: TOKEN,
      ...config,
    },
  })
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-fleet-'))
  cp = await createControlPlane({
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000, joinToken: TOKEN },
  })
  key = cp.bootstrapKey as string
  hosts = [await serveHost('h1'), await serveHost('h2')]
  for (const h of hosts) await joinHost(h)
})

afterEach(async () => {
  await cp.close()
  for (const h of hosts) {
    h.server.closeAllConnections()
    await new Promise((r) => h.server.close(r))
  }
  rmSync(dir, { recursive: true, force: true })
})

describe('fleet', () => {
  it('joins only with the join token; heartbeats only with the host credential', async () => {
    const h = hosts[0] as TestHost
    const bad = await call(
      'POST',
      '/v1/hosts/join',
      { id: 'x', url: h.url, version: 't', capacity: capacity() },
      'wrong-token-0123456789',
    )
    assert.equal(bad.status, 401)
    assert.equal(bad.body.error.code, 'UNAUTHENTICATED')
    const none = await call('POST', '/v1/hosts/join', { id: 'x', url: h.url, version: 't', capacity: capacity() }, null)
    assert.equal(none.status, 401)
    const beat = await call(
      'POST',
      `/v1/hosts/${h.id}/heartbeat`,
      { capacity: capacity({ sandboxes: 1 }) },
      h.credential,
    )
    assert.equal(beat.status, 204)
    const forged = await call('POST', `/v1/hosts/${h.id}/heartbeat`, { capacity: capacity() }, key)
    assert.equal(forged.status, 401)
    // a join again makes the old credential stale
    const old = h.credential
    await joinHost(h)
    assert.notEqual(h.credential, old)
    assert.equal((await call('POST', `/v1/hosts/${h.id}/heartbeat`, { capacity: capacity() }, old)).status, 401)
    // the hosts list is the admin's
    const list = await call('GET', '/v1/hosts')
    assert.equal(list.status, 200)
    assert.deepEqual(
      list.body.hosts.map((x: { id: string; state: string }) => [x.id, x.state]),
      [
        ['h1', 'ready'],
        ['h2', 'ready'],
      ],
    )
  })

  it('spreads creates over the hosts and sends each call to the sandbox host', async () => {
    const ids: string[] = []
    for (let i = 0; i < 4; i++) {
      const r = await create()
      assert.equal(r.status, 201, JSON.stringify(r.body))
      ids.push(r.body.id)
    }
    assert.deepEqual(
      hosts.map((h) => h.agent.live.size),
      [2, 2],
    )
    for (const id of ids) {
      const r = await call('POST', `/v1/sandboxes/${id}/exec`, { cmd: 'echo hi' })
      assert.equal(r.status, 200, JSON.stringify(r.body))
      assert.equal(r.body.stdout, 'ran echo hi')
    }
    const list = await call('GET', '/v1/hosts')
    assert.deepEqual(
      list.body.hosts.map((h: { placed: { sandboxes: number } }) => h.placed.sandboxes),
      [2, 2],
    )
    const victim = ids[0] as string
    const on = hostOf(victim)
    assert.equal((await call('DELETE', `/v1/sandboxes/${victim}`)).status, 204)
    // the stop runs on after the answer
    await cp.sandboxes.drain()
    assert.ok(hosts.find((h) => h.id === on)?.agent.stopped.includes(victim))
    const after = await call('GET', '/v1/hosts')
    assert.equal(
      after.body.hosts.reduce((n: number, h: { placed: { sandboxes: number } }) => n + h.placed.sandboxes, 0),
      3,
    )
  })

  it('a host with a warm pool takes creates until this replica has used its pool up, not the whole burst', async () => {
    const [h1] = hosts
    assert.ok(h1)
    await joinHost(h1, capacity({ pool: { base: 2 } }))
    const placedOn: string[] = []
    for (let i = 0; i < 5; i++) {
      const r = await create()
      assert.equal(r.status, 201, JSON.stringify(r.body))
      placedOn.push(hostOf(r.body.id) ?? '?')
    }
    // the two pooled ones on h1; then by load: h2 until even, then either
    assert.deepEqual(placedOn.slice(0, 4), ['h1', 'h1', 'h2', 'h2'])
  })

  it('creates ranked at the same moment see each other: a burst spreads as one at a time does', async () => {
    for (const h of hosts) await joinHost(h, capacity({ pool: { base: 1 } }))
    const made = await Promise.all([0, 1, 2, 3].map(() => create()))
    for (const r of made) assert.equal(r.status, 201, JSON.stringify(r.body))
    assert.deepEqual(
      hosts.map((h) => h.agent.live.size),
      [2, 2],
    )
  })

  it("a build's uploaded context reaches the building host as bytes, not as a path on the replica's disk", async () => {
    const r = await call('POST', '/v1/templates', { name: 'ctx', dockerfile: 'FROM scratch\nCOPY . /', context: true })
    assert.equal(r.status, 202, JSON.stringify(r.body))
    const context = new Uint8Array(300_000).map((_, i) => i % 251)
    const res = await cp.app.request(`/v1/builds/${r.body.build.id}/context`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-tar' },
      body: context,
    })
    assert.equal(res.status, 202, await res.text())
    let status = ''
    for (let i = 0; i < 100 && status !== 'ready' && status !== 'failed'; i++) {
      status = (await call('GET', `/v1/builds/${r.body.build.id}`)).body.status
      if (status !== 'ready') await new Promise((r) => setTimeout(r, 20))
    }
    assert.equal(status, 'ready')
    const built = hosts.flatMap((h) => h.agent.builds)
    assert.equal(built.length, 1)
    assert.equal(uploadOf(built[0]?.spec as TemplateBuildSpec), undefined)
    assert.deepEqual(new Uint8Array(built[0]?.context ?? []), context)
  })

  /** Builds template `name` (a Dockerfile, no context) through the API; resolves with the host that built it and its agent name. */
  async function buildTemplate(name: string): Promise<{ builder: TestHost; agentName: string }> {
    const r = await call('POST', '/v1/templates', { name, dockerfile: 'FROM scratch\n' })
    assert.equal(r.status, 202, JSON.stringify(r.body))
    let status = ''
    for (let i = 0; i < 100 && status !== 'ready' && status !== 'failed'; i++) {
      status = (await call('GET', `/v1/builds/${r.body.build.id}`)).body.status
      if (status !== 'ready') await new Promise((r) => setTimeout(r, 20))
    }
    assert.equal(status, 'ready')
    const builder = hosts.find((h) => h.agent.builds.length > 0) as TestHost
    const agentName = builder.agent.builds[0]?.spec.name as string
    return { builder, agentName }
  }

  it("a template built on one host runs on another: its image is pulled there from the builder's, signed for it", async () => {
    const { builder, agentName } = await buildTemplate('mine')
    const other = hosts.find((h) => h !== builder) as TestHost
    // registered there from its pinned spec, but its rootfs is only on the builder's disk
    assert.ok(other.agent.userTemplates.has(agentName))
    other.agent.missingRootfs.set(agentName, 'built-0123456789abcdef')
    // a sandbox made on the builder, hibernated, then woken on the other host: its image and its template's go there
    await call('POST', `/v1/hosts/${other.id}/cordon`)
    const { body } = await create({ template: 'mine' })
    assert.equal(hostOf(body.id), builder.id)
    assert.equal((await call('POST', `/v1/sandboxes/${body.id}/hibernate`)).status, 200)
    await call('POST', `/v1/hosts/${other.id}/uncordon`)
    await call('POST', `/v1/hosts/${builder.id}/cordon`)
    const r = await call('POST', `/v1/sandboxes/${body.id}/exec`, { cmd: 'echo woke' })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(hostOf(body.id), other.id)
    assert.equal(other.agent.rootfsPulls.length, 1)
    const url = new URL(other.agent.rootfsPulls[0]?.url ?? '')
    assert.equal(url.origin, builder.url)
    assert.equal(url.pathname, '/v1/agent/rootfs/built-0123456789abcdef')
    const expires = Number(url.searchParams.get('expires'))
    assert.equal(
      url.searchParams.get('sig'),
      agentSignature(builder.credential as string, 'built-0123456789abcdef', expires, 'rootfs'),
    )
    // signed for the rootfs only: the same signature reads no snapshot of that name
    assert.notEqual(
      url.searchParams.get('sig'),
      agentSignature(builder.credential as string, 'built-0123456789abcdef', expires),
    )
    // a create there now finds it in place
    const again = await create({ template: 'mine' })
    assert.equal(again.status, 201, JSON.stringify(again.body))
    assert.equal(hostOf(again.body.id), other.id)
    assert.equal(other.agent.rootfsPulls.length, 1)
  })

  it('a template whose image no reachable host has: 503 TEMPLATE_UNAVAILABLE, nothing placed', async () => {
    const { builder, agentName } = await buildTemplate('mine')
    const other = hosts.find((h) => h !== builder) as TestHost
    other.agent.missingRootfs.set(agentName, 'built-0123456789abcdef')
    other.agent.pullError = new AppError('SNAPSHOT_NOT_FOUND', 'the peer refused the image (404)')
    await call('POST', `/v1/hosts/${builder.id}/cordon`)
    const r = await create({ template: 'mine' })
    assert.equal(r.status, 503, JSON.stringify(r.body))
    assert.equal(r.body.error.code, 'TEMPLATE_UNAVAILABLE')
    assert.equal(r.body.error.details.template, agentName)
    assert.equal(other.agent.live.size, 0)
    assert.deepEqual(
      (await call('GET', '/v1/hosts')).body.hosts.map((h: { placed: { sandboxes: number } }) => h.placed.sandboxes),
      [0, 0],
    )
  })

  it('streams a command through the remote agent', async () => {
    const { body } = await create()
    const res = await cp.app.request(`/v1/sandboxes/${body.id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ cmd: 'x' }),
    })
    const text = await res.text()
    assert.match(text, /ran /)
    assert.match(text, /exit/)
  })

  it('a cordoned host takes no new sandboxes; none with room fails fast with NO_CAPACITY', async () => {
    assert.equal((await call('POST', '/v1/hosts/h1/cordon')).body.state, 'cordoned')
    for (let i = 0; i < 3; i++) assert.equal((await create()).status, 201)
    assert.deepEqual(
      hosts.map((h) => h.agent.live.size),
      [0, 3],
    )
    await call('POST', '/v1/hosts/h2/cordon')
    const full = await create()
    assert.equal(full.status, 503)
    assert.equal(full.body.error.code, 'NO_CAPACITY')
    assert.equal((await call('POST', '/v1/hosts/h1/uncordon')).body.state, 'ready')
    assert.equal((await create()).status, 201)
    assert.equal(hosts[0]?.agent.live.size, 1)
    assert.equal((await call('POST', '/v1/hosts/nope/cordon')).status, 404)
  })

  it('a host whose heartbeats stopped takes no new sandboxes', async () => {
    await restartControlPlane({ hostGraceSeconds: 0.3 })
    await new Promise((r) => setTimeout(r, 400))
    const h2 = hosts[1] as TestHost
    assert.equal(
      (await call('POST', `/v1/hosts/${h2.id}/heartbeat`, { capacity: capacity() }, h2.credential)).status,
      204,
    )
    await new Promise((r) => setTimeout(r, 1100))
    await call('POST', `/v1/hosts/${h2.id}/heartbeat`, { capacity: capacity() }, h2.credential)
    assert.equal((await create()).status, 201)
    assert.equal(h2.agent.live.size, 1)
    const states = (await call('GET', '/v1/hosts')).body.hosts.map((h: { state: string }) => h.state)
    assert.deepEqual(states, ['unreachable', 'ready'])
  })

  it('a snapshot is started from on the host that holds it; a fork lands beside its source', async () => {
    const { body } = await create()
    const snap = await call('POST', `/v1/sandboxes/${body.id}/snapshots`)
    assert.equal(snap.status, 201, JSON.stringify(snap.body))
    const holder = hostOf(body.id)
    for (let i = 0; i < 3; i++) {
      const r = await create({ snapshot: snap.body.id })
      assert.equal(r.status, 201, JSON.stringify(r.body))
      assert.equal(hostOf(r.body.id), holder)
    }
    const forks = await call('POST', `/v1/sandboxes/${body.id}/fork`, { count: 2 })
    assert.equal(forks.status, 201, JSON.stringify(forks.body))
    for (const f of forks.body.sandboxes) assert.equal(hostOf(f.id), holder)
  })

  it('fork with spread places the forks across hosts, each from a copy of one checkpoint', async () => {
    const { body } = await create()
    const holder = hosts.find((h) => h.agent.live.has(body.id)) as TestHost
    const other = hosts.find((h) => h !== holder) as TestHost
    const forks = await call('POST', `/v1/sandboxes/${body.id}/fork`, { count: 3, spread: true })
    assert.equal(forks.status, 201, JSON.stringify(forks.body))
    const where = forks.body.sandboxes.map((f: { id: string }) => hostOf(f.id))
    // least loaded first: the other host twice (it had none), then the holder
    assert.deepEqual(where.sort(), [holder.id, other.id, other.id].sort())
    assert.equal(other.agent.imports.length, 2)
    assert.ok(other.agent.imports.every((i) => i.startsWith('fork-')))
    // the copies and the checkpoint are gone once the forks started
    assert.deepEqual([...other.agent.snapshots], [])
    assert.deepEqual([...holder.agent.snapshots], [])
  })

  it('fork with spread leaves the source host even when it is the less loaded one', async () => {
    await call('POST', '/v1/hosts/h2/cordon')
    const { body } = await create()
    await call('POST', '/v1/hosts/h2/uncordon')
    await call('POST', '/v1/hosts/h1/cordon')
    for (let i = 0; i < 3; i++) assert.equal((await create()).status, 201)
    await call('POST', '/v1/hosts/h1/uncordon')
    assert.deepEqual(
      hosts.map((h) => h.agent.live.size),
      [1, 3],
    )
    const forks = await call('POST', `/v1/sandboxes/${body.id}/fork`, { count: 1, spread: true })
    assert.equal(forks.status, 201, JSON.stringify(forks.body))
    assert.equal(hostOf(forks.body.sandboxes[0].id), 'h2')
  })

  it('a hibernated sandbox whose host is cordoned wakes on another, from a copy of its image', async () => {
    const { body } = await create()
    const holder = hosts.find((h) => h.agent.live.has(body.id)) as TestHost
    const other = hosts.find((h) => h !== holder) as TestHost
    assert.equal((await call('POST', `/v1/sandboxes/${body.id}/hibernate`)).status, 200)
    await call('POST', `/v1/hosts/${holder.id}/cordon`)
    const r = await call('POST', `/v1/sandboxes/${body.id}/exec`, { cmd: 'echo woke' })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(hostOf(body.id), other.id)
    assert.equal(other.agent.imports.length, 1)
    // the image is gone from both once woken
    assert.deepEqual([...other.agent.snapshots], [])
    assert.deepEqual([...holder.agent.snapshots], [])
  })

  it('with a shared image store, a hibernated sandbox wakes on another host after its own died', async () => {
    await restartControlPlane({ hostGraceSeconds: 1.5 })
    const [h1, h2] = hosts as [TestHost, TestHost]
    const store = new Set<string>()
    for (const h of hosts) {
      h.agent.imageStore = store
      await joinHost(h, capacity({ imageStore: 'store-a' }))
    }
    const beat = setInterval(() => {
      void call(
        'POST',
        `/v1/hosts/${h2.id}/heartbeat`,
        { capacity: capacity({ imageStore: 'store-a' }) },
        h2.credential,
      )
    }, 100)
    try {
      await call('POST', '/v1/hosts/h2/cordon')
      const { body } = await create()
      await call('POST', '/v1/hosts/h2/uncordon')
      assert.equal(hostOf(body.id), 'h1')
      assert.equal((await call('POST', `/v1/sandboxes/${body.id}/hibernate`)).status, 200)
      for (let i = 0; i < 50 && store.size === 0; i++) await new Promise((r) => setTimeout(r, 20))
      const [image] = [...store]
      assert.ok(image?.startsWith('hib-'), JSON.stringify([...store]))
      // h1 dies: no heartbeats, nothing answers
      h1.server.close()
      for (const socket of h1.sockets) socket.destroy()
      // past the grace period (the fleet's view of the hosts is up to a second old)
      await new Promise((r) => setTimeout(r, 2600))
      const r = await call('POST', `/v1/sandboxes/${body.id}/exec`, { cmd: 'echo woke' })
      assert.equal(r.status, 200, JSON.stringify(r.body))
      assert.equal(hostOf(body.id), 'h2')
      assert.deepEqual(h2.agent.imports, [image])
      // woken, the image is gone, from the store too (removed through h2: h1 is gone)
      for (let i = 0; i < 50 && store.size > 0; i++) await new Promise((r) => setTimeout(r, 20))
      assert.deepEqual([...store], [])
    } finally {
      clearInterval(beat)
    }
  })

  it('drain moves running sandboxes live and images by copy; the host ends cordoned and empty', async () => {
    await call('POST', '/v1/hosts/h2/cordon')
    const a = (await create()).body
    const b = (await create()).body
    const snap = (await call('POST', `/v1/sandboxes/${a.id}/snapshots`)).body
    await call('POST', '/v1/hosts/h2/uncordon')
    const [h1, h2] = hosts as [TestHost, TestHost]
    assert.equal(hostOf(a.id), 'h1')
    const r = await call('POST', '/v1/hosts/h1/drain')
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.deepEqual(r.body.migrated.sort(), [a.id, b.id].sort())
    assert.deepEqual(r.body.moved, [snap.id])
    assert.deepEqual(r.body.failed, [])
    assert.equal(h1.agent.live.size, 0)
    assert.equal(hostOf(a.id), 'h2')
    assert.equal(hostOf(b.id), 'h2')
    for (const id of [a.id, b.id]) assert.equal((await call('GET', `/v1/sandboxes/${id}`)).body.state, 'running')
    assert.ok(h2.agent.snapshots.has(snap.id))
    assert.ok(!h1.agent.snapshots.has(snap.id))
    assert.equal((await call('GET', '/v1/hosts')).body.hosts[0].state, 'cordoned')
    // the snapshot now starts on h2
    const fromSnap = await create({ snapshot: snap.id })
    assert.equal(fromSnap.status, 201, JSON.stringify(fromSnap.body))
    assert.equal(hostOf(fromSnap.body.id), 'h2')
  })

  it('an exit a host reports errors its sandbox', async () => {
    const { body } = await create()
    const h = hosts.find((x) => x.agent.live.has(body.id)) as TestHost
    for (const l of h.agent.listeners) l(body.id, 'out_of_memory', 'killed')
    await new Promise((r) => setTimeout(r, 100))
    const got = await call('GET', `/v1/sandboxes/${body.id}`)
    assert.equal(got.body.state, 'errored')
    assert.equal(got.body.errorReason, 'out_of_memory')
  })

  it('proxies an exposed port through the sandbox host agent (bytes both ways, large bodies)', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 'x')
    const app = createServer((req, res) => {
      let n = 0
      req.on('data', (c: Buffer) => {
        n += c.length
      })
      req.on('end', () => res.end(req.method === 'POST' ? `got ${n}` : big))
    })
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', () => r()))
    const appPort = (app.address() as { port: number }).port
    const front = createServer(getRequestListener(cp.app.fetch))
    front.on('upgrade', cp.upgrade)
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', () => r()))
    const frontPort = (front.address() as { port: number }).port
    try {
      const { body } = await create({ network: { ports: [appPort] } })
      const ask = (method: string, payload?: Buffer) =>
        new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              port: frontPort,
              method,
              path: '/',
              headers: { host: `${appPort}-${body.id}.localhost`, authorization: `Bearer ${key}` },
            },
            (res) => {
              const parts: Buffer[] = []
              res.on('data', (c: Buffer) => parts.push(c))
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }))
            },
          )
          req.on('error', reject)
          req.end(payload)
        })
      const got = await ask('GET')
      assert.equal(got.status, 200)
      assert.equal(got.body.length, big.length)
      const sent = await ask('POST', big)
      assert.equal(sent.body.toString(), `got ${big.length}`)
    } finally {
      front.closeAllConnections()
      app.closeAllConnections()
      await new Promise((r) => front.close(r))
      await new Promise((r) => app.close(r))
    }
  })

  it('calls seen by one replica keep a sandbox from idling on another (activity shared through the store)', async () => {
    const opts = {
      dbPath: join(dir, 'db.sqlite'),
      logLevel: 'silent' as const,
      joinToken: TOKEN,
      reaperIntervalMs: 100,
      idleTimeoutSeconds: 1,
    }
    await cp.close()
    cp = await createControlPlane({ config: opts })
    const other = await createControlPlane({ config: opts })
    try {
      const { body } = await create()
      const viaOther = (path: string) =>
        other.app.request(path, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ cmd: 'true' }),
        })
      // 2.5 s of calls through the other replica only: past the idle timeout, still running
      for (let t = Date.now(); Date.now() - t < 2500; ) {
        assert.equal((await viaOther(`/v1/sandboxes/${body.id}/exec`)).status, 200)
        await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal((await call('GET', `/v1/sandboxes/${body.id}`)).body.state, 'running')
      // no calls anywhere: hibernated
      let state = ''
      for (let i = 0; i < 40 && state !== 'hibernated'; i++) {
        await new Promise((r) => setTimeout(r, 100))
        state = (await call('GET', `/v1/sandboxes/${body.id}`)).body.state
      }
      assert.equal(state, 'hibernated')
    } finally {
      await other.close()
    }
  })

  it('a control plane with its own agent has no hosts', async () => {
    const own = mkdtempSync(join(tmpdir(), 'fbx-own-'))
    const single = await createControlPlane({
      agent: new FakeAgent(),
      config: { dbPath: join(own, 'db.sqlite'), logLevel: 'silent', joinToken: TOKEN },
    })
    try {
      const r = await single.app.request('/v1/hosts', { headers: { authorization: `Bearer ${single.bootstrapKey}` } })
      assert.equal(r.status, 404)
    } finally {
      await single.close()
      rmSync(own, { recursive: true, force: true })
    }
  })
})
