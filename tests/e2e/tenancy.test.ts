// Many tenants on one host (issue 21): a key's quotas and rate limits hit exactly at their
// numbers with their codes and headers while its other sandboxes keep working; usage matches the
// sandboxes' real lifetimes; the audit log has every action; scopes, expiry and rotation hold.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type AuditEntry, type CreatedKey, ForkboxClient, type ForkboxError, Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()
const admin = () => new ForkboxClient({ ...host().conn, maxRetries: 0 })
/** A connection as `key`, with no retries (a 429 is seen, not waited out). */
const as = (key: CreatedKey, maxRetries = 0) => ({ url: host().conn.url, apiKey: key.key, maxRetries })

async function refused(p: Promise<unknown>): Promise<ForkboxError> {
  const err = await p.then(
    () => null,
    (e: ForkboxError) => e,
  )
  assert.ok(err, 'the call was not refused')
  return err
}

/** A raw call as `key` (status and headers matter). */
function raw(key: CreatedKey, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${host().conn.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', ...init.headers },
  })
}

describe('tenancy', () => {
  it('quotas: the sandboxes, memory and fork quotas refuse exactly past their numbers, never half-make a sandbox, and the key carries on', async () => {
    const key = await admin().keys.create('quota-tenant', { quotas: { sandboxes: 2, memoryMB: 1024 } })
    const a = await Sandbox.create({ ...as(key), resources: { memoryMB: 512 } })
    const b = await Sandbox.create({ ...as(key), resources: { memoryMB: 256 } })
    // a third sandbox: the sandboxes quota (2)
    let err = await refused(Sandbox.create({ ...as(key), resources: { memoryMB: 256 } }))
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    assert.equal(err.status, 429)
    assert.deepEqual(err.details, { quota: 'sandboxes', limit: 2, used: 2, asked: 1 })
    // forking would pass it too: nothing is checkpointed or made
    err = await refused(b.fork())
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    // no Retry-After: waiting does not free a quota (the SDKs do not retry it)
    const res = await raw(key, '/v1/sandboxes', {
      method: 'POST',
      body: JSON.stringify({ resources: { memoryMB: 256 } }),
    })
    assert.equal(res.status, 429)
    assert.equal(res.headers.get('retry-after'), null)
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'QUOTA_EXCEEDED')
    // the refused calls left nothing behind, and the key's sandboxes work on
    const mine = await Sandbox.list({ ...as(key) })
    assert.deepEqual(mine.map((s) => s.id).sort(), [a.id, b.id].sort())
    assert.equal((await a.exec(['echo', 'alive'])).stdout, 'alive\n')
    // one killed frees its place; memory (512 + 256 held, 1024 allowed) then refuses 512 more
    await b.kill()
    err = await refused(Sandbox.create({ ...as(key), resources: { memoryMB: 768 } }))
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    assert.equal(err.details?.quota, 'memoryMB')
    const c = await Sandbox.create({ ...as(key), resources: { memoryMB: 512 } })
    assert.equal((await c.exec(['echo', 'ok'])).stdout, 'ok\n')
    // a hibernated sandbox holds no place: its wake counts again, and is refused when full
    await c.hibernate()
    const d = await Sandbox.create({ ...as(key), resources: { memoryMB: 512 } })
    err = await refused(c.exec(['true']))
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    assert.equal((await c.getInfo()).state, 'hibernated')
    await d.kill()
    assert.equal((await c.exec(['echo', 'woke'])).stdout, 'woke\n')
    await Promise.all([a.kill(), c.kill()])
    // the admin sees the quota set, and can lift it
    assert.deepEqual((await admin().keys.get(key.id)).quotas, { sandboxes: 2, memoryMB: 1024 })
    await admin().keys.update(key.id, { quotas: {} })
    assert.deepEqual((await admin().keys.get(key.id)).quotas, {})
  })

  it('quotas: snapshot bytes refuse the snapshot that would pass them, and keep none of it', async () => {
    const key = await admin().keys.create('snapshot-tenant')
    const sbx = await Sandbox.create({ ...as(key) })
    const first = await sbx.snapshot()
    // room for the first only
    await admin().keys.update(key.id, { quotas: { snapshotBytes: first.sizeBytes + 1024 } })
    const err = await refused(sbx.snapshot())
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    assert.equal(err.details?.quota, 'snapshotBytes')
    assert.deepEqual(
      (await new ForkboxClient(as(key)).snapshots.list()).map((s) => s.id),
      [first.id],
    )
    await new ForkboxClient(as(key)).snapshots.delete(first.id)
    await sbx.kill()
  })

  it('quotas: template bytes refuse a build that would pass them (and keep none of it), concurrent builds refuse at once', async () => {
    const key = await admin().keys.create('template-tenant', { quotas: { templateBytes: 1 } })
    const own = new ForkboxClient(as(key))
    const name = `quota-${process.pid}`
    // nothing held yet: the build runs, and once its size is known it is over the quota
    const failed = (await refused(
      own.templates.build({ name, dockerfile: 'FROM forkbox:base\nENV A=1\n' }),
    )) as ForkboxError & {
      build: { id: string }
    }
    assert.equal(failed.code, 'QUOTA_EXCEEDED')
    assert.equal((await own.templates.getBuild(failed.build.id)).status, 'failed')
    // room for it: it is kept; then the quota is what it holds, and the next build is refused at once
    await admin().keys.update(key.id, { quotas: { templateBytes: 10 * 1024 ** 3 } })
    const second = await own.templates.build({ name, dockerfile: 'FROM forkbox:base\nENV A=2\n' })
    assert.equal(second.status, 'ready')
    await admin().keys.update(key.id, { quotas: { templateBytes: 1 } })
    let err = await refused(own.templates.build({ name, dockerfile: 'FROM forkbox:base\nENV A=3\n' }))
    assert.equal(err.code, 'QUOTA_EXCEEDED')
    assert.equal(err.details?.quota, 'templateBytes')
    await admin().keys.update(key.id, { quotas: { concurrentBuilds: 0 } })
    err = await refused(own.templates.build({ name, dockerfile: 'FROM forkbox:base\nENV A=4\n' }))
    assert.equal(err.details?.quota, 'concurrentBuilds')
    await own.templates.delete(name)
  })

  it('rate limits: the burst passes, the next call is 429 RATE_LIMITED with Retry-After, and the SDK waits it out', async () => {
    const key = await admin().keys.create('rate-tenant', { rateLimits: { data: { perSecond: 1, burst: 5 } } })
    const sbx = await Sandbox.create({ ...as(key) })
    // the create was a `create` call: the data bucket is still full
    const statuses: number[] = []
    let limited: Response | null = null
    for (let i = 0; i < 6; i++) {
      const res = await raw(key, `/v1/sandboxes/${sbx.id}`)
      statuses.push(res.status)
      if (res.status === 429) limited = res
      else await res.body?.cancel()
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429])
    assert.ok(limited)
    const retryAfter = Number(limited.headers.get('retry-after'))
    assert.ok(retryAfter >= 1 && retryAfter <= 2, `Retry-After: ${retryAfter}`)
    const body = (await limited.json()) as { error: { code: string; details: Record<string, unknown> } }
    assert.equal(body.error.code, 'RATE_LIMITED')
    assert.equal(body.error.details.class, 'data')
    // the SDK honours Retry-After: with retries the call goes through once the bucket refills
    const patient = await Sandbox.connect(sbx.id, as(key, 3))
    assert.equal((await patient.exec(['echo', 'later'])).stdout, 'later\n')
    // other keys are not held back
    assert.equal(
      (await admin().keys.list()).some((k) => k.id === key.id),
      true,
    )
    await new Promise((r) => setTimeout(r, 1100))
    await sbx.kill()
  })

  it('rate limits: creates are counted apart, per key', async () => {
    const key = await admin().keys.create('create-rate', { rateLimits: { create: { perSecond: 0.01, burst: 2 } } })
    const a = await Sandbox.create({ ...as(key) })
    const b = await Sandbox.create({ ...as(key) })
    const err = await refused(Sandbox.create({ ...as(key) }))
    assert.equal(err.code, 'RATE_LIMITED')
    assert.equal(err.status, 429)
    // data calls are another bucket: they go on
    assert.equal((await a.exec(['echo', 'a'])).stdout, 'a\n')
    await Promise.all([a.kill(), b.kill()])
  })

  it('usage: vCPU-seconds and GiB-seconds match the sandbox lifetime within 2%, hibernation stops the clock, and the counters are on /metrics', async () => {
    const key = await admin().keys.create('metered')
    const from = new Date(Date.now() - 60_000)
    const t0 = performance.now()
    const sbx = await Sandbox.create({ ...as(key), resources: { vcpus: 2, memoryMB: 512 } })
    await new Promise((r) => setTimeout(r, 8000))
    await sbx.kill()
    const wall = (performance.now() - t0) / 1000
    const info = await sbx.getInfo()
    const lifetime = (Date.parse(info.endedAt as string) - Date.parse(info.createdAt)) / 1000
    const client = new ForkboxClient(as(key))
    const report = await client.keys.usage({ from, granularity: 'total' })
    const { total } = report
    assert.ok(Math.abs(total.sandboxSeconds - lifetime) <= lifetime * 0.02, `${total.sandboxSeconds} vs ${lifetime}`)
    assert.ok(total.sandboxSeconds <= wall, `${total.sandboxSeconds} s metered, ${wall} s seen`)
    assert.ok(Math.abs(total.vcpuSeconds - 2 * lifetime) <= 2 * lifetime * 0.02)
    assert.ok(Math.abs(total.memoryGiBSeconds - 0.5 * lifetime) <= 0.5 * lifetime * 0.02)
    // by the hour: the buckets add up to the total
    const hourly = await client.keys.usage({ from, granularity: 'hour' })
    const summed = hourly.buckets.reduce((n, b) => n + b.sandboxSeconds, 0)
    assert.ok(Math.abs(summed - total.sandboxSeconds) < 0.01)
    // a hibernated sandbox is not metered while it sleeps
    const h = await Sandbox.create({ ...as(key) })
    await h.hibernate()
    const asleep = (await client.keys.usage({ from, granularity: 'total' })).total.sandboxSeconds
    await new Promise((r) => setTimeout(r, 3000))
    const later = (await client.keys.usage({ from, granularity: 'total' })).total.sandboxSeconds
    assert.ok(later - asleep < 0.01, `metered while hibernated: ${later - asleep} s`)
    await h.kill()
    // another key cannot read it; the admin can
    const other = await admin().keys.create('nosy')
    const err = await refused(new ForkboxClient(as(other)).keys.usage({ from, key: key.id }))
    assert.equal(err.code, 'FORBIDDEN')
    assert.ok((await admin().keys.usage({ from, key: key.id, granularity: 'total' })).total.sandboxSeconds >= lifetime)
    const metrics = await (
      await fetch(`${host().conn.url}/metrics`, { headers: { authorization: `Bearer ${host().conn.apiKey}` } })
    ).text()
    const line = metrics.split('\n').find((l) => l.startsWith(`forkbox_usage_vcpu_seconds_total{key="${key.id}"}`))
    assert.ok(line, 'no usage counter for the key')
    assert.ok(Number(line.split(' ').at(-1)) >= 2 * lifetime * 0.98)
  })

  it('scopes: read-only reads and cannot act, no-network cannot open the network, a template scope holds', async () => {
    const owner = await admin().keys.create('scoped-owner')
    const sbx = await Sandbox.create({ ...as(owner) })
    const reader = await admin().keys.create('reader', { scopes: { readOnly: true } })
    assert.ok(Array.isArray(await Sandbox.list({ ...as(reader) })))
    let err = await refused(Sandbox.create({ ...as(reader) }))
    assert.equal(err.code, 'FORBIDDEN')
    assert.equal(err.details?.scope, 'readOnly')
    const offline = await admin().keys.create('offline', { scopes: { noNetwork: true } })
    err = await refused(Sandbox.create({ ...as(offline), network: { internet: true } }))
    assert.equal(err.code, 'FORBIDDEN')
    assert.equal(err.details?.scope, 'noNetwork')
    const closed = await Sandbox.create({ ...as(offline) })
    err = await refused(closed.updateNetwork({ ports: [8080] }))
    assert.equal(err.code, 'FORBIDDEN')
    const baseOnly = await admin().keys.create('base-only', { scopes: { templates: ['base'] } })
    err = await refused(Sandbox.create({ ...as(baseOnly), template: 'code-interpreter' }))
    assert.equal(err.code, 'FORBIDDEN')
    assert.equal(err.details?.scope, 'templates')
    const ok = await Sandbox.create({ ...as(baseOnly), template: 'base' })
    await Promise.all([sbx.kill(), closed.kill(), ok.kill()])
  })

  it('keys: one expires at its time; a rotation keeps the old secret for its grace only', async () => {
    const brief = await admin().keys.create('brief', { ttlSeconds: 2 })
    assert.ok(Array.isArray(await Sandbox.list({ ...as(brief) })))
    await new Promise((r) => setTimeout(r, 2500))
    assert.equal((await refused(Sandbox.list({ ...as(brief) }))).code, 'UNAUTHENTICATED')

    const key = await admin().keys.create('rotating')
    const sbx = await Sandbox.create({ ...as(key) })
    // a key rotates itself
    const rotated = await new ForkboxClient(as(key)).keys.rotate('me', { graceSeconds: 3 })
    assert.notEqual(rotated.key, key.key)
    assert.ok(rotated.previousSecretExpiresAt)
    // both secrets work during the grace, on the same key's sandboxes
    assert.equal((await (await Sandbox.connect(sbx.id, as(key))).exec(['echo', 'old'])).stdout, 'old\n')
    assert.equal((await (await Sandbox.connect(sbx.id, as(rotated))).exec(['echo', 'new'])).stdout, 'new\n')
    await new Promise((r) => setTimeout(r, 3500))
    assert.equal((await refused(Sandbox.list({ ...as(key) }))).code, 'UNAUTHENTICATED')
    assert.equal((await (await Sandbox.connect(sbx.id, as(rotated))).exec(['echo', 'still'])).stdout, 'still\n')
    // another key may not rotate it
    const other = await admin().keys.create('other-rotator')
    assert.equal((await refused(new ForkboxClient(as(other)).keys.rotate(key.id))).code, 'FORBIDDEN')
    await (await Sandbox.connect(sbx.id, as(rotated))).kill()
  })

  it('audit: every key and admin action is logged with who, when, from where; only the admin reads it', async () => {
    const since = new Date()
    const key = await admin().keys.create('audited')
    await admin().keys.update(key.id, { quotas: { sandboxes: 5 } })
    const sbx = await Sandbox.create({ ...as(key) })
    const [fork] = await sbx.fork()
    const snap = await sbx.snapshot()
    await new ForkboxClient(as(key)).snapshots.delete(snap.id)
    await sbx.hibernate()
    await fork?.kill()
    await sbx.kill()
    // a template it builds, the admin publishes, it deletes
    const own = new ForkboxClient(as(key))
    const name = `audited-${process.pid}`
    const build = await own.templates.build({ name, dockerfile: 'FROM forkbox:base\n' })
    assert.equal((await own.templates.waitForBuild(build.id)).status, 'ready')
    const published = await fetch(`${host().conn.url}/v1/templates/by-id/${build.templateId}/public`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${host().conn.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ public: true }),
    })
    assert.equal(published.status, 200)
    await own.templates.delete(name)
    await own.keys.rotate('me', { graceSeconds: 0 })
    await admin().keys.revoke(key.id)
    const entries: AuditEntry[] = []
    for await (const e of admin().keys.audit({ from: since })) entries.push(e)
    const of = (action: string, target?: string) =>
      entries.find((e) => e.action === action && (target === undefined || e.target === target))
    const adminId = (await admin().keys.get('me')).id
    for (const [action, target, who] of [
      ['key.create', key.id, adminId],
      ['key.update', key.id, adminId],
      ['sandbox.create', sbx.id, key.id],
      ['sandbox.fork', sbx.id, key.id],
      ['snapshot.create', sbx.id, key.id],
      ['snapshot.delete', snap.id, key.id],
      ['sandbox.hibernate', sbx.id, key.id],
      ['sandbox.kill', fork?.id, key.id],
      ['sandbox.kill', sbx.id, key.id],
      ['template.create', build.templateId, key.id],
      ['template.publish', build.templateId, adminId],
      ['template.delete', name, key.id],
      ['key.rotate', key.id, key.id],
      ['key.revoke', key.id, adminId],
    ] as const) {
      const e = of(action, target)
      assert.ok(e, `no ${action} of ${target} in the log`)
      assert.equal(e.keyId, who, action)
      assert.ok(e.status < 300, `${action}: ${e.status}`)
      assert.match(e.ip ?? '', /127\.0\.0\.1/)
      assert.match(e.userAgent ?? '', /./)
      assert.ok(Date.parse(e.at) >= since.getTime() - 1000)
    }
    assert.deepEqual(of('sandbox.fork', sbx.id)?.detail, { forks: [fork?.id] })
    // a refused admin action is logged too, and a non-admin cannot read the log
    const nosy = await admin().keys.create('nosy-auditor')
    assert.equal((await refused(new ForkboxClient(as(nosy)).keys.create('sneaky'))).code, 'FORBIDDEN')
    const refusedEntries: AuditEntry[] = []
    for await (const e of admin().keys.audit({ from: since, key: nosy.id })) refusedEntries.push(e)
    assert.deepEqual(
      refusedEntries.map((e) => [e.action, e.status]),
      [['key.create', 403]],
    )
    const page = new ForkboxClient(as(nosy)).keys.audit()
    assert.equal((await refused(page.next())).code, 'FORBIDDEN')
  })
})
