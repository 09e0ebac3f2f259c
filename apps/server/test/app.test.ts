// The HTTP app in-process (app.request), over a fake agent: auth, ownership, validation, lifecycle.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import {
  AppError,
  CreateSandboxRequest,
  ExecRequest,
  ExecResult,
  Execution,
  errorCodes,
  FORKBOX_VERSION,
  ForkRequest,
  RunCodeRequest,
  Sandbox,
} from '@forkbox/protocol'
import { OpenAPIHono } from '@hono/zod-openapi'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import type { App, AppEnv } from '../src/http/env.ts'
import * as examples from '../src/http/examples.ts'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { ROUTES } from '../src/routes/index.ts'
import { FakeAgent } from './fake-agent.ts'

let dir: string
let agent: FakeAgent
let cp: ControlPlane
let key: string

async function call(method: string, path: string, body?: unknown, k: string | null = key) {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (k) headers.authorization = `Bearer ${k}`
  const res = await cp.app.request(path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  return {
    status: res.status,
    body: text ? JSON.parse(text) : null,
    requestId: res.headers.get('x-request-id'),
    version: res.headers.get('forkbox-version'),
  }
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-server-'))
  agent = new FakeAgent()
  cp = await createControlPlane({
    agent,
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000 },
  })
  key = cp.bootstrapKey as string
})

afterEach(async () => {
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
})

interface ErrorDoc {
  description: string
  content: Record<string, { example?: { error: { code: string } } }>
}

describe('control plane', () => {
  it('makes one admin key on first start and none after', async () => {
    assert.match(key, /^fbx_[0-9a-f]{40}$/)
    await cp.close()
    cp = await createControlPlane({ agent, config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent' } })
    assert.equal(cp.bootstrapKey, null)
  })

  it('requires a key everywhere but /healthz and /openapi.json', async () => {
    const health = await call('GET', '/healthz', undefined, null)
    assert.equal(health.status, 200)
    assert.deepEqual(health.body, { ok: true, version: FORKBOX_VERSION })
    const doc = await call('GET', '/openapi.json', undefined, null)
    assert.equal(doc.status, 200)
    assert.equal(doc.body.info.version, FORKBOX_VERSION)
    // every response says the server's version, errors included; a route it does not serve says so
    assert.equal(health.version, FORKBOX_VERSION)
    const unknown = await call('POST', '/v1/sandboxes/x/teleport', {})
    assert.equal(unknown.status, 404)
    assert.equal(unknown.version, FORKBOX_VERSION)
    assert.deepEqual(unknown.body.error.details, { noRoute: true })
    assert.match(unknown.body.error.message, /^no route POST \/v1\/sandboxes\/x\/teleport$/)
    const r = await call('GET', '/v1/sandboxes', undefined, null)
    assert.equal(r.status, 401)
    assert.equal(r.body.error.code, 'UNAUTHENTICATED')
    assert.equal(r.body.error.requestId, r.requestId)
    assert.equal((await call('GET', '/v1/sandboxes', undefined, 'fbx_nope')).status, 401)
  })

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

  it('a call refused as its sandbox moves (SANDBOX_MOVING: never started) is sent again until it goes through', async () => {
    const created = await call('POST', '/v1/sandboxes', { template: 'base' })
    const real = agent.exec.bind(agent)
    let refused = 0
    agent.exec = async (...args: Parameters<FakeAgent['exec']>) => {
      if (refused < 3) {
        refused++
        throw new AppError('SANDBOX_MOVING', 'moving')
      }
      return real(...args)
    }
    const r = await call('POST', `/v1/sandboxes/${created.body.id}/exec`, { cmd: 'echo hi' })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(refused, 3)
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
    cp = await createControlPlane({
      agent,
      config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000, idleTimeoutSeconds: 60 },
    })
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

  it('after a restart, re-attached sandboxes run on; the rest are lost; strays are stopped', async () => {
    const kept = (await call('POST', '/v1/sandboxes', {})).body
    const lost = (await call('POST', '/v1/sandboxes', {})).body
    const killed = (await call('POST', '/v1/sandboxes', {})).body
    await call('DELETE', `/v1/sandboxes/${killed.id}`)
    await cp.close()
    // the new agent process found `kept` (and `killed`, whose stop the crash cut short) still running
    agent = new FakeAgent()
    agent.adopt(kept.id)
    agent.adopt(killed.id)
    cp = await createControlPlane({ agent, config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent' } })
    assert.equal((await call('GET', `/v1/sandboxes/${kept.id}`)).body.state, 'running')
    assert.equal((await call('POST', `/v1/sandboxes/${kept.id}/exec`, { cmd: 'true' })).status, 200)
    const got = await call('GET', `/v1/sandboxes/${lost.id}`)
    assert.deepEqual([got.body.state, got.body.errorReason], ['errored', 'lost'])
    assert.deepEqual(agent.stopped, [killed.id])
    const events = (await call('GET', `/v1/sandboxes/${kept.id}/events`)).body.events.map(
      (e: { type: string }) => e.type,
    )
    assert.ok(events.includes('re-attached'), events.join(','))
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

  it('validates input with stable codes', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    const cases: [string, string, unknown, number, string][] = [
      ['POST', '/v1/sandboxes', '{"template":', 400, 'MALFORMED_JSON'],
      ['POST', '/v1/sandboxes', { template: 'nope' }, 404, 'TEMPLATE_NOT_FOUND'],
      ['POST', '/v1/sandboxes', { ttlSeconds: 0 }, 400, 'VALIDATION_FAILED'],
      ['POST', '/v1/sandboxes', { envs: { 'bad name': 'x' } }, 400, 'VALIDATION_FAILED'],
      ['GET', `/v1/sandboxes/${s.body.id}/files?path=/a/../b`, undefined, 400, 'INVALID_PATH'],
      ['GET', `/v1/sandboxes/${s.body.id}/files?path=/a%00b`, undefined, 400, 'INVALID_PATH'],
      ['POST', `/v1/sandboxes/${s.body.id}/files/rename`, { from: '/a', to: '../b' }, 400, 'INVALID_PATH'],
      ['POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: [] }, 400, 'VALIDATION_FAILED'],
      ['GET', '/v1/nope', undefined, 404, 'NOT_FOUND'],
    ]
    for (const [m, p, b, status, code] of cases) {
      const r = await call(m, p, b)
      assert.deepEqual([r.status, r.body.error.code], [status, code], `${m} ${p}`)
    }
  })

  it('an exec past its timeout is EXEC_TIMEOUT with the partial output', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    agent.nextExec = { timedOut: true, exitCode: 137, signal: 'SIGKILL', stdout: Buffer.from('partial') }
    const r = await call('POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: 'sleep 9', timeoutSeconds: 1 })
    assert.equal(r.status, 408)
    assert.equal(r.body.error.code, 'EXEC_TIMEOUT')
    assert.equal(r.body.error.details.stdout, 'partial')
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

  it('runs a cell as one Execution, or streams it as SSE with the same content', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const r = await call('POST', `/v1/sandboxes/${sbx.id}/code`, { code: 'x' })
    assert.equal(r.status, 200)
    assert.deepEqual(r.body.logs, { stdout: ['x ', 'é\n'], stderr: ['warn\n'] })
    assert.deepEqual(r.body.results, [{ isMainResult: true, text: 'x' }])
    assert.equal(r.body.executionCount, 1)
    const res = await cp.app.request(`/v1/sandboxes/${sbx.id}/code`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'y' }),
    })
    assert.equal(res.headers.get('content-type'), 'text/event-stream')
    const events = (await res.text())
      .trim()
      .split('\n\n')
      .map((block) => {
        const event = /^event: (.*)$/m.exec(block)?.[1]
        const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null')
        return { event, data }
      })
    assert.deepEqual(
      events.map((e) => e.event),
      ['stdout', 'stdout', 'stderr', 'result', 'end'],
    )
    assert.equal(events[1]?.data.text, 'é\n')
    assert.equal(events[4]?.data.executionCount, 1)
    // errors before the cell starts are plain HTTP errors, streaming or not
    const missing = await cp.app.request('/v1/sandboxes/sbx_nope/code', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'y' }),
    })
    assert.equal(missing.status, 404)
    assert.equal(((await missing.json()) as { error: { code: string } }).error.code, 'SANDBOX_NOT_FOUND')
    const bad = await call('POST', `/v1/sandboxes/${sbx.id}/code`, { code: 'x', language: 'cobol' })
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED')
  })

  it('streams a directory watch as SSE; a refused watch is a plain error', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const res = await cp.app.request(`/v1/sandboxes/${sbx.id}/files/watch?path=work&recursive=true`, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(res.headers.get('content-type'), 'text/event-stream')
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    while ((text.match(/^event: change$/gm) ?? []).length < 5)
      text += new TextDecoder().decode((await reader.read()).value)
    await reader.cancel()
    const events = text
      .trim()
      .split('\n\n')
      .map((block) => ({
        event: /^event: (.*)$/m.exec(block)?.[1],
        data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null'),
      }))
    assert.deepEqual(events[0], { event: 'start', data: { path: '/home/user/work' } })
    assert.deepEqual(events[1], {
      event: 'change',
      data: { type: 'create', name: 'sub/f.txt', path: '/home/user/work/sub/f.txt' },
    })
    assert.deepEqual(
      events.slice(1).map((e) => e.data.type),
      ['create', 'write', 'remove', 'rename', 'chmod'],
    )
    const missing = await call('GET', `/v1/sandboxes/${sbx.id}/files/watch?path=/missing`)
    assert.equal(missing.status, 404)
    assert.equal(missing.body.error.code, 'FILE_NOT_FOUND')
    const bad = await call('GET', `/v1/sandboxes/${sbx.id}/files/watch?path=../etc`)
    assert.equal(bad.body.error.code, 'INVALID_PATH')
  })

  it('signs a file URL that works with no key, for its one sandbox, path, operation and user', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const made = await call('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: '/work/up.txt', operation: 'write' })
    assert.equal(made.status, 200)
    assert.ok(made.body.url.endsWith(made.body.path), made.body.url)
    assert.ok(Date.parse(made.body.expiresAt) - Date.now() > 3500_000)
    const put = (path: string, method = 'PUT') =>
      cp.app.request(path, { method, body: method === 'GET' ? undefined : 'hello' })
    const written = await put(made.body.path)
    assert.equal(written.status, 200)
    assert.equal(((await written.json()) as { size: number }).size, 5)
    assert.equal(written.headers.get('access-control-allow-origin'), '*')
    const preflight = await cp.app.request(made.body.path, { method: 'OPTIONS' })
    assert.equal(preflight.status, 204)
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /PUT/)
    // anything the signature does not cover is refused: another path, the other operation, another user
    const refused = async (path: string, method = 'PUT') => {
      const res = await put(path, method)
      assert.equal(res.status, 401, `${method} ${path}`)
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED')
    }
    await refused(made.body.path.replace('up.txt', 'other.txt'))
    await refused(made.body.path, 'GET')
    await refused(made.body.path.replace('path=', 'user=root&path='))
    await refused(made.body.path.replace(/expires=\d+/, 'expires=9999999999'))
    const { body: other } = await call('POST', '/v1/sandboxes', { template: 'base' })
    await refused(made.body.path.replace(sbx.id, other.id))
    // a signature on another route is not a credential there
    assert.equal((await cp.app.request(`/v1/sandboxes?signature=x`)).status, 401)
    const bad = await call('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: 'x', expiresInSeconds: 8 * 24 * 3600 })
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED')
    // revoking the owner's key voids its URLs
    const k2 = (await call('POST', '/v1/keys', { name: 'url-owner' })).body
    const { body: s2 } = await call('POST', '/v1/sandboxes', {}, k2.key)
    const u2 = (await call('POST', `/v1/sandboxes/${s2.id}/files/url`, { path: 'a', operation: 'write' }, k2.key)).body
    assert.equal((await put(u2.path)).status, 200)
    await call('DELETE', `/v1/keys/${k2.id}`)
    await refused(u2.path)
  })

  it("lists a key's events across sandboxes and streams new ones live, resumable by id", async () => {
    const a = (await call('POST', '/v1/sandboxes', {})).body
    const other = await call('POST', '/v1/keys', { name: 'other' })
    await call('POST', '/v1/sandboxes', {}, other.body.key)
    await call('POST', `/v1/sandboxes/${a.id}/exec`, { cmd: 'true' })
    const listed = (await call('GET', '/v1/events')).body.events
    assert.deepEqual(
      listed.map((e: { type: string }) => e.type),
      ['created', 'started', 'exec-started', 'exec-ended'],
    )
    assert.ok(
      listed.every((e: { sandboxId: string }) => e.sandboxId === a.id),
      "another key's events leaked",
    )
    const filtered = (await call('GET', `/v1/events?type=exec-ended&sandboxId=${a.id}`)).body.events
    assert.deepEqual(
      filtered.map((e: { detail: string }) => e.detail),
      ['exit 0'],
    )
    // live: past events after `since`, then new ones as they happen
    const res = await cp.app.request(`/v1/events?since=${listed[1].id}`, {
      headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    })
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const seen: string[] = []
    let text = ''
    const read = async (until: string) => {
      while (!seen.includes(until)) {
        const { value } = await reader.read()
        text += new TextDecoder().decode(value)
        for (const m of text.matchAll(/^event: (.+)$/gm)) if (!seen.includes(m[1] as string)) seen.push(m[1] as string)
      }
    }
    await read('exec-ended')
    await call('DELETE', `/v1/sandboxes/${a.id}`)
    await read('killed')
    assert.deepEqual(seen, ['exec-started', 'exec-ended', 'killed'])
    assert.match(text, /^id: \d+$/m)
    // the client going away ends the stream (and its subscription) on the server
    await reader.cancel()
  })

  it('serves Prometheus metrics (admin only) whose counts match what happened', async () => {
    const a = (await call('POST', '/v1/sandboxes', {})).body
    await call('POST', '/v1/sandboxes', {})
    await call('DELETE', `/v1/sandboxes/${a.id}`)
    await call('POST', `/v1/sandboxes/${a.id}/exec`, { cmd: 'true' }) // 409: not running
    await call('GET', '/v1/sandboxes/sbx-nope') // 404
    const res = await cp.app.request('/metrics', { headers: { authorization: `Bearer ${key}` } })
    assert.equal(res.status, 200)
    const families = parsePrometheusTextFormat(await res.text()) as {
      name: string
      metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string> }[]
    }[]
    const family = (name: string) => families.find((f) => f.name === name)?.metrics ?? []
    const byState = Object.fromEntries(family('forkbox_sandboxes').map((m) => [m.labels?.state, Number(m.value)]))
    assert.deepEqual(byState, { killed: 1, running: 1 })
    const errors = Object.fromEntries(family('forkbox_api_errors_total').map((m) => [m.labels?.code, Number(m.value)]))
    assert.deepEqual(errors, { SANDBOX_NOT_RUNNING: 1, SANDBOX_NOT_FOUND: 1 })
    assert.equal(Number(family('forkbox_sandbox_create_seconds')[0]?.buckets?.['+Inf']), 2)
    assert.deepEqual(
      family('forkbox_pool_size').map((m) => [m.labels?.template, m.value]),
      [['base', '2']],
    )
    assert.equal(family('forkbox_sandbox_memory_bytes').length, 1)
    const other = await call('POST', '/v1/keys', { name: 'other' })
    const denied = await cp.app.request('/metrics', { headers: { authorization: `Bearer ${other.body.key}` } })
    assert.equal(denied.status, 403)
  })

  it('serves an OpenAPI 3.1 document covering every registered route', async () => {
    const doc = (await call('GET', '/openapi.json')).body as { openapi: string; paths: Record<string, object> }
    assert.equal(doc.openapi, '3.1.0')
    // what the route list serves, read off a bare app it registers on (not off the document)
    const bare: App = new OpenAPIHono<AppEnv>()
    for (const r of ROUTES) r.register(bare)
    const served = bare.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => ({ method: r.method.toLowerCase(), path: r.path.replace(/:(\w+)/g, '{$1}') }))
    assert.ok(served.length >= ROUTES.length, `${served.length} handlers for ${ROUTES.length} route modules`)
    const undocumented = served.filter((r) => !(r.method in (doc.paths[r.path] ?? {})))
    assert.deepEqual(undocumented, [], 'every route is in /openapi.json')
    // and every error code is in it, under its status, with an example body
    const text = JSON.stringify(doc)
    const missing = errorCodes.filter((code) => !text.includes(`\`${code}\``))
    assert.deepEqual(missing, [], 'every error code is documented')
    const sandbox = doc.paths['/v1/sandboxes/{id}'] as { get: { responses: Record<string, ErrorDoc> } }
    const notFound = sandbox.get.responses['404']?.content['application/json']
    assert.match(String(sandbox.get.responses['404']?.description), /`SANDBOX_NOT_FOUND`/)
    assert.equal(notFound?.example?.error.code, 'NOT_FOUND')
    // the hand-written examples are in it, and each is valid for its schema
    const create = doc.paths['/v1/sandboxes'] as {
      post: { requestBody: { content: Record<string, { example?: unknown }> } }
    }
    assert.deepEqual(create.post.requestBody.content['application/json']?.example, examples.createSandboxExample)
    CreateSandboxRequest.parse(examples.createSandboxExample)
    Sandbox.parse(examples.sandboxExample)
    ExecRequest.parse(examples.execExample)
    ExecResult.parse(examples.execResultExample)
    RunCodeRequest.parse(examples.runCodeExample)
    Execution.parse(examples.executionExample)
    ForkRequest.parse(examples.forkExample)
  })

  it("an admin lists, inspects and kills any key's sandboxes; revoking a key can kill its sandboxes", async () => {
    const tenant = (await call('POST', '/v1/keys', { name: 'tenant' })).body as { id: string; key: string }
    const a = (await call('POST', '/v1/sandboxes', {}, tenant.key)).body as { id: string }
    const b = (await call('POST', '/v1/sandboxes', {}, tenant.key)).body as { id: string }
    // a tenant sees only its own; the admin key's own list is its own too
    assert.equal((await call('GET', '/v1/sandboxes?owner=*', undefined, tenant.key)).status, 403)
    assert.deepEqual((await call('GET', '/v1/sandboxes')).body.sandboxes, [])
    const all = (await call('GET', '/v1/sandboxes?owner=*')).body.sandboxes.map((s: { id: string }) => s.id)
    assert.deepEqual(all.sort(), [a.id, b.id].sort())
    const theirs = (await call('GET', `/v1/sandboxes?owner=${tenant.id}`)).body.sandboxes
    assert.equal(theirs.length, 2)
    assert.equal((await call('GET', `/v1/sandboxes/${a.id}`)).body.state, 'running')
    assert.equal((await call('DELETE', `/v1/sandboxes/${a.id}`)).status, 204)
    assert.equal((await call('GET', `/v1/sandboxes/${a.id}`)).body.state, 'killed')
    // the tenant's other key-scoped calls see nothing of the admin's
    const mine = (await call('POST', '/v1/sandboxes', {})).body as { id: string }
    assert.equal((await call('DELETE', `/v1/sandboxes/${mine.id}`, undefined, tenant.key)).status, 404)
    assert.equal((await call('DELETE', `/v1/keys/${tenant.id}?killSandboxes=true`)).status, 204)
    assert.equal((await call('GET', `/v1/sandboxes/${b.id}`)).body.state, 'killed')
    assert.equal((await call('GET', `/v1/sandboxes/${mine.id}`)).body.state, 'running')
  })
})
