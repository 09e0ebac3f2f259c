// Hibernate, wake, freeze and the reaper's TTL and idle passes (services/hibernation.ts), through the
// REST API in-process.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { createControlPlane } from '../src/index.ts'
import { agent, call, cp, dir, setControlPlane, useControlPlane } from './app-harness.ts'

describe('hibernation', () => {
  useControlPlane()

  it('the reaper expires sandboxes past their TTL, and setTimeout moves the deadline', async () => {
    const a = await call('POST', '/v1/sandboxes', { ttlSeconds: 10 })
    const b = await call('POST', '/v1/sandboxes', { ttlSeconds: 10 })
    await call('POST', `/v1/sandboxes/${b.body.id}/timeout`, { ttlSeconds: 3600 })
    const expired = await cp.sandboxes.reap(new Date(Date.now() + 60_000))
    assert.deepEqual(expired, [a.body.id])
    assert.equal((await call('GET', `/v1/sandboxes/${a.body.id}`)).body.state, 'killed')
    assert.equal((await call('GET', `/v1/sandboxes/${b.body.id}`)).body.state, 'running')
    const events = await call('GET', `/v1/sandboxes/${a.body.id}/events`)
    assert.deepEqual(
      events.body.events.map((e: { type: string }) => e.type),
      ['created', 'started', 'expired'],
    )
  })

  it("onTimeout 'hibernate': the TTL hibernates it instead; a call wakes it with its TTL anew; kept hibernated, not killed", async () => {
    const s = (await call('POST', '/v1/sandboxes', { ttlSeconds: 10, onTimeout: 'hibernate' })).body
    assert.equal(s.onTimeout, 'hibernate')
    const plain = (await call('POST', '/v1/sandboxes', { ttlSeconds: 10 })).body
    assert.equal(plain.onTimeout, 'kill')
    await cp.sandboxes.reap(new Date(Date.now() + 60_000))
    const paused = (await call('GET', `/v1/sandboxes/${s.id}`)).body
    assert.equal(paused.state, 'hibernated')
    assert.equal((await call('GET', `/v1/sandboxes/${plain.id}`)).body.state, 'killed')
    // kept past its TTL while hibernated (for the longest TTL)
    assert.ok(Date.parse(paused.expiresAt) > Date.now() + 6 * 24 * 3600_000, paused.expiresAt)
    await cp.sandboxes.reap(new Date(Date.now() + 120_000))
    assert.equal((await call('GET', `/v1/sandboxes/${s.id}`)).body.state, 'hibernated')
    // a call wakes it, and its 10 s start again
    assert.equal((await call('POST', `/v1/sandboxes/${s.id}/exec`, { cmd: 'true' })).status, 200)
    const woke = (await call('GET', `/v1/sandboxes/${s.id}`)).body
    assert.equal(woke.state, 'running')
    const left = Date.parse(woke.expiresAt) - Date.now()
    assert.ok(left > 5_000 && left <= 10_000, `${left} ms left`)
    // a TTL set meanwhile is the one a later wake restores
    await call('POST', `/v1/sandboxes/${s.id}/timeout`, { ttlSeconds: 100 })
    await cp.sandboxes.reap(new Date(Date.now() + 200_000))
    assert.equal((await call('GET', `/v1/sandboxes/${s.id}`)).body.state, 'hibernated')
    assert.equal((await call('POST', `/v1/sandboxes/${s.id}/exec`, { cmd: 'true' })).status, 200)
    const again = Date.parse((await call('GET', `/v1/sandboxes/${s.id}`)).body.expiresAt) - Date.now()
    assert.ok(again > 90_000 && again <= 100_000, `${again} ms left`)
    // its retention over, a hibernated one ends
    await cp.sandboxes.reap(new Date(Date.now() + 200_000))
    await cp.sandboxes.reap(new Date(Date.now() + 8 * 24 * 3600_000))
    assert.equal((await call('GET', `/v1/sandboxes/${s.id}`)).body.state, 'killed')
  })

  it("a disk-only hibernate (keepMemory: false, onTimeout 'hibernate-disk') asks the agent for a fresh start of its template", async () => {
    const s = (await call('POST', '/v1/sandboxes', { ttlSeconds: 10, onTimeout: 'hibernate-disk' })).body
    assert.equal(s.onTimeout, 'hibernate-disk')
    await cp.sandboxes.reap(new Date(Date.now() + 60_000))
    assert.equal((await call('GET', `/v1/sandboxes/${s.id}`)).body.state, 'hibernated')
    assert.deepEqual(agent.snapshotOptions.at(-1), { final: true, freshStart: { template: 'base' } })
    // woken, it hibernates the same way at its next timeout, and by hand as asked
    assert.equal((await call('POST', `/v1/sandboxes/${s.id}/exec`, { cmd: 'true' })).status, 200)
    const full = await call('POST', `/v1/sandboxes/${s.id}/hibernate`, {})
    assert.equal(full.body.state, 'hibernated')
    assert.deepEqual(agent.snapshotOptions.at(-1), { final: true })
    assert.equal((await call('POST', `/v1/sandboxes/${s.id}/exec`, { cmd: 'true' })).status, 200)
    const diskOnly = await call('POST', `/v1/sandboxes/${s.id}/hibernate`, { keepMemory: false })
    assert.equal(diskOnly.body.state, 'hibernated')
    assert.deepEqual(agent.snapshotOptions.at(-1), { final: true, freshStart: { template: 'base' } })
    const bad = await call('POST', `/v1/sandboxes/${s.id}/hibernate`, { keepMemory: 'no' })
    assert.equal(bad.status, 400)
  })

  it('an idle sandbox (persistent too) is frozen through its agent; a call thaws it; events say so', async () => {
    const idle = (await call('POST', '/v1/sandboxes', { template: 'base', ttlSeconds: 3600 })).body
    const kept = (await call('POST', '/v1/sandboxes', { template: 'base', ttlSeconds: 3600, persistent: true })).body
    const never = (await call('POST', '/v1/sandboxes', { template: 'base', ttlSeconds: 3600, freeze: false })).body
    assert.deepEqual([idle.freeze, never.freeze], [true, false])
    // not idle for the 10 s yet
    await cp.sandboxes.reap(new Date(Date.now() + 5_000))
    assert.deepEqual(agent.frozen, [])
    const soon = Date.now() + 11_000
    await cp.sandboxes.reap(new Date(soon))
    assert.deepEqual(agent.frozen.sort(), [idle.id, kept.id].sort())
    // frozen stays frozen: not asked again
    await cp.sandboxes.reap(new Date(soon + 5_000))
    assert.equal(agent.frozen.filter((id) => id === idle.id).length, 1)
    assert.equal((await call('POST', `/v1/sandboxes/${idle.id}/exec`, { cmd: 'true' })).status, 200)
    const types = (await call('GET', `/v1/sandboxes/${idle.id}/events`)).body.events.map(
      (e: { type: string }) => e.type,
    )
    assert.deepEqual(types.slice(-4), ['frozen', 'thawed', 'exec-started', 'exec-ended'])
    // idle again, it is frozen again
    await cp.sandboxes.reap(new Date(Date.now() + 30_000))
    assert.equal(agent.frozen.filter((id) => id === idle.id).length, 2)
  })

  it('the idle reaper hibernates a sandbox no request touched, not a persistent or busy one', async () => {
    await cp.close()
    setControlPlane(
      await createControlPlane({
        agent,
        config: {
          dbPath: join(dir, 'db.sqlite'),
          logLevel: 'silent',
          reaperIntervalMs: 60_000,
          idleTimeoutSeconds: 60,
        },
      }),
    )
    const idle = (await call('POST', '/v1/sandboxes', { template: 'base', ttlSeconds: 3600 })).body
    const kept = (await call('POST', '/v1/sandboxes', { template: 'base', ttlSeconds: 3600, persistent: true })).body
    assert.equal(kept.persistent, true)
    const soon = new Date(Date.now() + 30_000)
    await cp.sandboxes.reap(soon)
    await new Promise((r) => setTimeout(r, 10))
    assert.equal((await call('GET', `/v1/sandboxes/${idle.id}`)).body.state, 'running')
    const later = new Date(Date.now() + 120_000)
    await cp.sandboxes.reap(later)
    await new Promise((r) => setTimeout(r, 10))
    assert.equal((await call('GET', `/v1/sandboxes/${idle.id}`)).body.state, 'hibernated')
    assert.equal((await call('GET', `/v1/sandboxes/${kept.id}`)).body.state, 'running')
    const events = (await call('GET', `/v1/sandboxes/${idle.id}/events`)).body.events.map(
      (e: { type: string }) => e.type,
    )
    assert.deepEqual(events.slice(-2), ['idle', 'hibernated'])
    // the next request wakes it, and counts as activity
    assert.equal((await call('POST', `/v1/sandboxes/${idle.id}/exec`, { cmd: 'true' })).status, 200)
    assert.equal((await call('GET', `/v1/sandboxes/${idle.id}`)).body.state, 'running')
    await cp.sandboxes.reap(new Date(Date.now() + 30_000))
    await new Promise((r) => setTimeout(r, 10))
    assert.equal((await call('GET', `/v1/sandboxes/${idle.id}`)).body.state, 'running')
  })
})
