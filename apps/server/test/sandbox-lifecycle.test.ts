// Sandboxes' records, ownership, create, kill, exit, network, snapshots and fork (services/sandboxes.ts),
// through the REST API in-process.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { agent, call, useControlPlane } from './app-harness.ts'

describe('sandbox lifecycle', () => {
  useControlPlane()

  it('creates with template defaults, passes envs to the agent, and lists by metadata', async () => {
    const r = await call('POST', '/v1/sandboxes', {
      metadata: { team: 'a' },
      envs: { X: '1' },
      resources: { memoryMB: 1024 },
    })
    assert.equal(r.status, 201)
    assert.equal(r.body.state, 'running')
    assert.deepEqual(r.body.resources, { vcpus: 1, memoryMB: 1024, diskMB: 1024, pids: 1024 })
    assert.deepEqual(agent.started[0]?.envs, { X: '1' })
    await call('POST', '/v1/sandboxes', { metadata: { team: 'b' } })
    const listed = await call('GET', '/v1/sandboxes?metadata.team=a')
    assert.deepEqual(
      listed.body.sandboxes.map((s: { id: string }) => s.id),
      [r.body.id],
    )
  })

  it('refuses resources above the template maximum', async () => {
    const r = await call('POST', '/v1/sandboxes', { resources: { memoryMB: 4096 } })
    assert.equal(r.status, 422)
    assert.equal(r.body.error.code, 'RESOURCE_LIMIT_EXCEEDED')
    assert.equal(agent.started.length, 0)
  })

  it("hides one key's sandboxes from another", async () => {
    const other = await call('POST', '/v1/keys', { name: 'other' })
    assert.equal(other.status, 201)
    const mine = await call('POST', '/v1/sandboxes', {})
    for (const [m, p] of [
      ['GET', `/v1/sandboxes/${mine.body.id}`],
      ['DELETE', `/v1/sandboxes/${mine.body.id}`],
      ['POST', `/v1/sandboxes/${mine.body.id}/exec`],
    ] as const) {
      const r = await call(m, p, m === 'POST' ? { cmd: 'true' } : undefined, other.body.key)
      assert.equal(r.status, 404, `${m} ${p}`)
      assert.equal(r.body.error.code, 'SANDBOX_NOT_FOUND')
    }
    assert.deepEqual((await call('GET', '/v1/sandboxes', undefined, other.body.key)).body.sandboxes, [])
    // a non-admin key cannot manage keys
    assert.equal((await call('GET', '/v1/keys', undefined, other.body.key)).status, 403)
    assert.equal(agent.stopped.length, 0)
  })

  it('kill is immediate and idempotent; exec after kill is SANDBOX_NOT_RUNNING', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    assert.equal((await call('DELETE', `/v1/sandboxes/${s.body.id}`)).status, 204)
    assert.equal((await call('DELETE', `/v1/sandboxes/${s.body.id}`)).status, 204)
    assert.deepEqual(agent.stopped, [s.body.id])
    const r = await call('POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: 'true' })
    assert.equal(r.status, 409)
    assert.equal(r.body.error.code, 'SANDBOX_NOT_RUNNING')
  })

  it('a sandbox that dies by itself is errored with its reason', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    agent.die(s.body.id, 'out_of_memory')
    const got = await call('GET', `/v1/sandboxes/${s.body.id}`)
    assert.equal(got.body.state, 'errored')
    assert.equal(got.body.errorReason, 'out_of_memory')
    const r = await call('POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: 'true' })
    assert.equal(r.status, 410)
    assert.deepEqual([r.body.error.code, r.body.error.details.reason], ['SANDBOX_ERRORED', 'out_of_memory'])
  })

  it('network: closed by default, passed to the agent, updated field by field, bad rules refused', async () => {
    const closed = await call('POST', '/v1/sandboxes', {})
    assert.deepEqual(closed.body.network, { internet: false, allowOut: [], denyOut: [], ports: [] })
    assert.match(closed.body.accessToken, /^fbt_[0-9a-f]{40}$/)
    assert.deepEqual(agent.started.at(-1)?.network, { internet: false, allowOut: [], denyOut: [] })
    const open = await call('POST', '/v1/sandboxes', {
      network: { internet: true, allowOut: ['203.0.113.0/24', '*.example.com'], ports: [8080, 3000] },
    })
    assert.deepEqual(open.body.network.ports, [3000, 8080])
    assert.deepEqual(agent.started.at(-1)?.network?.allowOut, ['203.0.113.0/24', '*.example.com'])
    const updated = await call('PATCH', `/v1/sandboxes/${open.body.id}/network`, { denyOut: ['198.51.100.1'] })
    assert.deepEqual(updated.body.network, {
      internet: true,
      allowOut: ['203.0.113.0/24', '*.example.com'],
      denyOut: ['198.51.100.1'],
      ports: [3000, 8080],
    })
    assert.deepEqual(agent.networks.get(open.body.id)?.denyOut, ['198.51.100.1'])
    for (const network of [
      { allowOut: ['203.0.113.1'] },
      { internet: true, allowOut: ['::1'] },
      { internet: true, denyOut: ['not a name'] },
      { internet: true, allowOut: ['10.0.0.0/33'] },
      { ports: [0] },
      { internet: true, proxy: 'x' },
    ]) {
      const r = await call('POST', '/v1/sandboxes', { network })
      assert.deepEqual([r.status, r.body.error.code], [400, 'VALIDATION_FAILED'], JSON.stringify(network))
    }
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    const r = await call('PATCH', `/v1/sandboxes/${open.body.id}/network`, { internet: false }, other)
    assert.equal(r.body.error.code, 'SANDBOX_NOT_FOUND')
  })

  it("named snapshots: a sandbox starts from one by its name; the name moves to a newer snapshot; another key's name means nothing", async () => {
    const src = (await call('POST', '/v1/sandboxes', {})).body
    const first = await call('POST', `/v1/sandboxes/${src.id}/snapshots`, { name: 'golden' })
    assert.equal(first.status, 201, JSON.stringify(first.body))
    assert.equal(first.body.name, 'golden')
    const made = await call('POST', '/v1/sandboxes', { snapshot: 'golden' })
    assert.equal(made.status, 201, JSON.stringify(made.body))
    assert.equal(agent.started.at(-1)?.snapshot, first.body.id)
    const second = (await call('POST', `/v1/sandboxes/${src.id}/snapshots`, { name: 'golden' })).body
    await call('POST', '/v1/sandboxes', { snapshot: 'golden' })
    assert.equal(agent.started.at(-1)?.snapshot, second.id)
    const named = (await call('GET', '/v1/snapshots?name=golden')).body.snapshots
    assert.deepEqual(
      named.map((s: { id: string }) => s.id),
      [second.id],
    )
    const all = (await call('GET', '/v1/snapshots')).body.snapshots
    assert.equal(all.find((s: { id: string }) => s.id === first.body.id)?.name, null)
    const other = (await call('POST', '/v1/keys', { name: 'b' })).body.key
    const theirs = await call('POST', '/v1/sandboxes', { snapshot: 'golden' }, other)
    assert.deepEqual([theirs.status, theirs.body.error.code], [404, 'SNAPSHOT_NOT_FOUND'])
    // a name that looks like an id, or holds a slash, is refused
    for (const name of ['snap-0123', 'a/b', ''])
      assert.equal((await call('POST', `/v1/sandboxes/${src.id}/snapshots`, { name })).status, 400, name)
    assert.equal((await call('DELETE', '/v1/snapshots/golden')).status, 204)
    assert.equal((await call('GET', '/v1/snapshots?name=golden')).body.snapshots.length, 0)
  })

  it('snapshots belong to their key; a sandbox from one gets its template and resources', async () => {
    const src = await call('POST', '/v1/sandboxes', { resources: { memoryMB: 1024 } })
    const snap = await call('POST', `/v1/sandboxes/${src.body.id}/snapshots`)
    assert.equal(snap.status, 201)
    assert.equal(snap.body.sandboxId, src.body.id)
    const made = await call('POST', '/v1/sandboxes', { snapshot: snap.body.id })
    assert.equal(made.status, 201)
    assert.deepEqual(made.body.resources, src.body.resources)
    assert.equal(agent.started.at(-1)?.snapshot, snap.body.id)
    const other = (await call('POST', '/v1/keys', { name: 'b' })).body.key
    const theirs = await call('POST', '/v1/sandboxes', { snapshot: snap.body.id }, other)
    assert.deepEqual([theirs.status, theirs.body.error.code], [404, 'SNAPSHOT_NOT_FOUND'])
    assert.equal((await call('DELETE', `/v1/snapshots/${snap.body.id}`, undefined, other)).status, 404)
    assert.equal((await call('DELETE', `/v1/snapshots/${snap.body.id}`)).status, 204)
    assert.equal(agent.snapshots.has(snap.body.id), false)
    const again = await call('POST', '/v1/sandboxes', { snapshot: snap.body.id })
    assert.equal(again.body.error.code, 'SNAPSHOT_NOT_FOUND')
  })

  it('fork makes count sandboxes from a transient snapshot and records both sides', async () => {
    const src = await call('POST', '/v1/sandboxes', { metadata: { job: 'x' } })
    const r = await call('POST', `/v1/sandboxes/${src.body.id}/fork`, { count: 3 })
    assert.equal(r.status, 201)
    assert.equal(r.body.sandboxes.length, 3)
    for (const f of r.body.sandboxes) assert.deepEqual([f.state, f.metadata], ['running', { job: 'x' }])
    assert.equal(agent.snapshots.size, 0, 'the fork snapshot is deleted once the forks run')
    const events = (await call('GET', `/v1/sandboxes/${src.body.id}/events`)).body.events
    assert.equal(events.at(-1).type, 'forked')
    const forkEvents = (await call('GET', `/v1/sandboxes/${r.body.sandboxes[0].id}/events`)).body.events
    assert.deepEqual(
      forkEvents.map((e: { type: string }) => e.type),
      ['created', 'started', 'forked-from'],
    )
  })

  it('a fork that fails part way leaves no fork running', async () => {
    const src = await call('POST', '/v1/sandboxes', {})
    agent.failAfter = 2
    const r = await call('POST', `/v1/sandboxes/${src.body.id}/fork`, { count: 4 })
    assert.equal(r.status, 500)
    const running = (await call('GET', '/v1/sandboxes?state=running')).body.sandboxes.map((s: { id: string }) => s.id)
    assert.deepEqual(running, [src.body.id])
    assert.equal(agent.snapshots.size, 0)
  })
})
