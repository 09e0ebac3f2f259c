// The parts of tenancy with exact numbers: the rate limiter's buckets (on SQLite and on a real
// Postgres: one atomic upsert each), usage bucketing, and the quota and scope checks.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { checkQuotas, checkScopes } from '../src/services/quotas.ts'
import { openStore, type Store } from '../src/store/db.ts'
import { RateLimiter } from '../src/store/rate-limits.ts'
import { type UsagePeriod, usageReport } from '../src/store/usage.ts'
import { startPostgres, type TestPostgres } from './postgres.ts'

describe('rate limiter', () => {
  let dir: string
  let postgres: TestPostgres
  const stores: Store[] = []
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'forkbox-rate-'))
    postgres = await startPostgres()
    stores.push(await openStore({ path: join(dir, 'db.sqlite') }))
    stores.push(await openStore({ path: join(dir, 'unused'), url: await postgres.database('rates') }))
  })
  after(async () => {
    for (const s of stores) await s.close()
    await postgres.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  for (const dialect of ['sqlite', 'postgres'] as const) {
    it(`${dialect}: a burst of exactly burst calls, then one per interval, with the wait until the next`, async () => {
      const store = stores[dialect === 'sqlite' ? 0 : 1] as Store
      const limiter = new RateLimiter(store.db, store.dialect)
      const limit = { perSecond: 2, burst: 3 }
      const t = 1_800_000_000_000
      const at = async (ms: number) => (await limiter.take('k:data', limit, t + ms)).ok
      assert.deepEqual([await at(0), await at(0), await at(0), await at(0)], [true, true, true, false])
      const refused = await limiter.take('k:data', limit, t + 100)
      assert.deepEqual(refused, { ok: false, retryAfterMs: 400 })
      // a token every 500 ms
      assert.equal(await at(499), false)
      assert.equal(await at(500), true)
      assert.equal(await at(600), false)
      // another key's bucket is its own
      assert.equal((await limiter.take('other:data', limit, t + 600)).ok, true)
      // idle long enough, the bucket is full again (and never more than full)
      assert.deepEqual(await Promise.all([at(10_000), at(10_000), at(10_000), at(10_000)]).then((r) => r.sort()), [
        false,
        true,
        true,
        true,
      ])
    })

    it(`${dialect}: concurrent takes never pass the burst`, async () => {
      const store = stores[dialect === 'sqlite' ? 0 : 1] as Store
      const limiter = new RateLimiter(store.db, store.dialect)
      const t = 1_900_000_000_000
      const results = await Promise.all(
        Array.from({ length: 40 }, () => limiter.take('race:create', { perSecond: 0.001, burst: 10 }, t)),
      )
      assert.equal(results.filter((r) => r.ok).length, 10)
    })
  }
})

describe('usage report', () => {
  const h = 3600_000
  const t0 = Date.parse('2026-12-01T00:00:00Z')
  const sandbox = (start: number, end: number | null, vcpus = 2, memoryMB = 512): UsagePeriod => ({
    owner: 'k',
    kind: 'sandbox',
    startedAt: t0 + start,
    endedAt: end === null ? null : t0 + end,
    vcpus,
    memoryMB,
    bytes: 0,
    egressBytes: 0,
  })

  it('splits a period across hour buckets and sums them in the total', () => {
    // 00:30 to 02:15
    const r = usageReport('k', [sandbox(0.5 * h, 2.25 * h)], t0, t0 + 3 * h, 'hour', t0 + 3 * h)
    assert.deepEqual(
      r.buckets.map((b) => b.sandboxSeconds),
      [1800, 3600, 900],
    )
    assert.equal(r.total.sandboxSeconds, 6300)
    assert.equal(r.total.vcpuSeconds, 12600)
    assert.equal(r.total.memoryGiBSeconds, 3150)
  })

  it('counts an open period up to now, and egress in the bucket its period ended in', () => {
    const open = sandbox(0, null, 1, 1024)
    const ended = { ...sandbox(0, 1.5 * h, 1, 1024), egressBytes: 5000 }
    const r = usageReport('k', [open, ended], t0, t0 + 3 * h, 'hour', t0 + 2 * h)
    assert.deepEqual(
      r.buckets.map((b) => [b.sandboxSeconds, b.egressBytes]),
      [
        [7200, 0],
        [3600 + 1800, 5000],
        [0, 0],
      ],
    )
  })

  it('meters snapshots by their size and time kept', () => {
    const snap: UsagePeriod = { ...sandbox(0, h), kind: 'snapshot', vcpus: 0, memoryMB: 0, bytes: 2 * 1024 ** 3 }
    const r = usageReport('k', [snap], t0, t0 + h, 'total', t0 + h)
    assert.equal(r.total.snapshotGiBSeconds, 7200)
    assert.equal(r.total.sandboxSeconds, 0)
  })
})

describe('quota and scope checks', () => {
  const held = { sandboxes: 2, vcpus: 3, memoryMB: 1536, diskMB: 2048 }
  const ask = { sandboxes: 1, vcpus: 1, memoryMB: 512, diskMB: 1024 }

  it('refuses exactly past a quota, naming it', () => {
    assert.doesNotThrow(() => checkQuotas({ sandboxes: 3, memoryMB: 2048 }, held, ask))
    assert.throws(
      () => checkQuotas({ sandboxes: 2 }, held, ask),
      (e: AppError) =>
        e.code === 'QUOTA_EXCEEDED' &&
        JSON.stringify(e.details) === '{"quota":"sandboxes","limit":2,"used":2,"asked":1}',
    )
    assert.throws(
      () => checkQuotas({ memoryMB: 2047 }, held, ask),
      (e: AppError) => e.details?.quota === 'memoryMB',
    )
    // a wake asks for no disk: a full disk quota does not refuse it
    assert.doesNotThrow(() => checkQuotas({ diskMB: 2048 }, held, { ...ask, diskMB: 0 }))
  })

  it('scopes: templates by name (any version), and no network of any kind', () => {
    const closed = { internet: false, allowOut: [], denyOut: [], ports: [] }
    assert.doesNotThrow(() => checkScopes({ templates: ['mine'] }, { template: 'mine@3' }))
    assert.throws(() => checkScopes({ templates: ['mine'] }, { template: 'base' }), AppError)
    assert.doesNotThrow(() => checkScopes({ noNetwork: true }, { network: closed }))
    for (const open of [{ internet: true }, { allowOut: ['1.2.3.4'] }, { ports: [80] }])
      assert.throws(() => checkScopes({ noNetwork: true }, { network: { ...closed, ...open } }), AppError)
  })
})
