// Metering: what each key used, as periods of sandboxes' lives and snapshots' storage. A period is
// opened and closed in the same transaction as the state change that causes it, so it is counted
// once whichever replica made the change, and survives restarts (it is in the store).
import type { ResolvedResources, UsageFigures, UsageReport } from '@forkbox/protocol'
import { type Kysely, sql, type Transaction } from 'kysely'
import type { Dialect, Schema } from './schema.ts'

type Tx = Kysely<Schema> | Transaction<Schema>

/** States in which a sandbox holds its vCPUs and memory (and is metered). */
export const METERED_STATES = ['starting', 'running'] as const

const GiB = 1024 ** 3
const HOUR_MS = 3600_000
const DAY_MS = 24 * HOUR_MS
/** A report has at most this many buckets (a year of days, a month of hours). */
const MAX_BUCKETS = 800

export interface UsagePeriod {
  owner: string
  kind: 'sandbox' | 'snapshot'
  startedAt: number
  endedAt: number | null
  vcpus: number
  memoryMB: number
  bytes: number
  egressBytes: number
}

/** Opens a period of a sandbox (what it holds) or a snapshot (its size); none is open for it yet (a unique index keeps one). */
async function openPeriod(
  db: Tx,
  p: { owner: string; kind: 'sandbox' | 'snapshot'; id: string; vcpus?: number; memoryMB?: number; bytes?: number },
  at: string,
): Promise<void> {
  await db
    .insertInto('usage_periods')
    .values({
      owner: p.owner,
      kind: p.kind,
      subject_id: p.id,
      started_at: at,
      vcpus: p.vcpus ?? 0,
      memory_mb: p.memoryMB ?? 0,
      bytes: p.bytes ?? 0,
      egress_bytes: 0,
    })
    .onConflict((oc) => oc.doNothing())
    .execute()
}

export function openSandboxPeriod(
  db: Tx,
  s: { id: string; owner: string; resources: ResolvedResources },
  at: string,
): Promise<void> {
  const { vcpus, memoryMB } = s.resources
  return openPeriod(db, { owner: s.owner, kind: 'sandbox', id: s.id, vcpus, memoryMB }, at)
}

export function openSnapshotPeriod(
  db: Tx,
  s: { id: string; owner: string; sizeBytes: number },
  at: string,
): Promise<void> {
  return openPeriod(db, { owner: s.owner, kind: 'snapshot', id: s.id, bytes: s.sizeBytes }, at)
}

/** Closes the subject's open period, if any. */
export async function closePeriod(db: Tx, subjectId: string, at: string): Promise<void> {
  await db
    .updateTable('usage_periods')
    .set({ ended_at: at })
    .where('subject_id', '=', subjectId)
    .where('ended_at', 'is', null)
    .execute()
}

function zero(): UsageFigures {
  return { vcpuSeconds: 0, memoryGiBSeconds: 0, egressBytes: 0, snapshotGiBSeconds: 0, sandboxSeconds: 0 }
}

/** Adds what `p` used between `from` and `to` (epoch ms) to `into`; its egress goes to the bucket it ended in (or `now`'s). */
function accrue(into: UsageFigures, p: UsagePeriod, from: number, to: number, now: number): void {
  const end = p.endedAt ?? now
  const s = Math.max(p.startedAt, from)
  const e = Math.min(end, to)
  if (e > s) {
    const seconds = (e - s) / 1000
    if (p.kind === 'sandbox') {
      into.vcpuSeconds += p.vcpus * seconds
      into.memoryGiBSeconds += ((p.memoryMB * 1024 * 1024) / GiB) * seconds
      into.sandboxSeconds += seconds
    } else into.snapshotGiBSeconds += (p.bytes / GiB) * seconds
  }
  if (p.egressBytes > 0 && end >= from && end < to) into.egressBytes += p.egressBytes
}

function add(into: UsageFigures, f: UsageFigures): void {
  into.vcpuSeconds += f.vcpuSeconds
  into.memoryGiBSeconds += f.memoryGiBSeconds
  into.egressBytes += f.egressBytes
  into.snapshotGiBSeconds += f.snapshotGiBSeconds
  into.sandboxSeconds += f.sandboxSeconds
}

/** The start of the bucket holding `t` (UTC hours or days). */
function bucketStart(t: number, granularity: 'hour' | 'day'): number {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS
  return Math.floor(t / size) * size
}

/** Usage of `periods` from `from` to `to`, in buckets of `granularity` (`total`: one bucket). */
export function usageReport(
  key: string,
  periods: UsagePeriod[],
  from: number,
  to: number,
  granularity: 'hour' | 'day' | 'total',
  now = Date.now(),
): UsageReport {
  const edges: number[] = [from]
  if (granularity !== 'total') {
    const size = granularity === 'hour' ? HOUR_MS : DAY_MS
    for (let t = bucketStart(from, granularity) + size; t < to; t += size) edges.push(t)
  }
  edges.push(to)
  const buckets = edges.slice(0, -1).map((start, i) => {
    const end = edges[i + 1] as number
    const f = zero()
    for (const p of periods) accrue(f, p, start, end, now)
    return { start: new Date(start).toISOString(), end: new Date(end).toISOString(), ...f }
  })
  const total = zero()
  for (const b of buckets) add(total, b)
  return { key, from: new Date(from).toISOString(), to: new Date(to).toISOString(), granularity, buckets, total }
}

/** How many buckets a report would have (refused past MAX_BUCKETS). */
export function bucketCount(from: number, to: number, granularity: 'hour' | 'day' | 'total'): number {
  if (granularity === 'total') return 1
  return Math.ceil((to - from) / (granularity === 'hour' ? HOUR_MS : DAY_MS)) + 1
}
export { MAX_BUCKETS }

export class UsageStore {
  constructor(
    private readonly db: Kysely<Schema>,
    private readonly dialect: Dialect,
  ) {}

  /** Periods of `owner` (null: every key's) that overlap `from`..`to`. */
  async periods(owner: string | null, from: Date, to: Date): Promise<UsagePeriod[]> {
    let q = this.db
      .selectFrom('usage_periods')
      .selectAll()
      .where('started_at', '<', to.toISOString())
      .where((e) => e.or([e('ended_at', 'is', null), e('ended_at', '>=', from.toISOString())]))
    if (owner !== null) q = q.where('owner', '=', owner)
    const rows = await q.execute()
    return rows.map((r) => ({
      owner: r.owner,
      kind: r.kind === 'snapshot' ? 'snapshot' : 'sandbox',
      startedAt: Date.parse(r.started_at),
      endedAt: r.ended_at ? Date.parse(r.ended_at) : null,
      vcpus: Number(r.vcpus),
      memoryMB: Number(r.memory_mb),
      bytes: Number(r.bytes),
      egressBytes: Number(r.egress_bytes),
    }))
  }

  /**
   * Every key's usage from the start until now (the Prometheus counters), by key: summed in the
   * database, so a scrape costs the same after a year as after a day.
   */
  async totals(now = new Date()): Promise<Map<string, UsageFigures>> {
    const at = now.toISOString()
    const seconds =
      this.dialect === 'postgres'
        ? sql<number>`extract(epoch from (coalesce(ended_at, ${at})::timestamptz - started_at::timestamptz))`
        : sql<number>`(julianday(coalesce(ended_at, ${at})) - julianday(started_at)) * 86400`
    const rows = await this.db
      .selectFrom('usage_periods')
      .select((e) => [
        'owner',
        'kind',
        e.fn.sum<number>(sql<number>`vcpus * ${seconds}`).as('vcpu_seconds'),
        e.fn.sum<number>(sql<number>`memory_mb * ${seconds}`).as('mb_seconds'),
        e.fn.sum<number>(sql<number>`bytes * ${seconds}`).as('byte_seconds'),
        e.fn.sum<number>(seconds).as('seconds'),
        e.fn.sum<number>('egress_bytes').as('egress'),
      ])
      .where('started_at', '<=', at)
      .groupBy(['owner', 'kind'])
      .execute()
    const out = new Map<string, UsageFigures>()
    for (const r of rows) {
      const f = out.get(r.owner) ?? zero()
      out.set(r.owner, f)
      if (r.kind === 'snapshot') f.snapshotGiBSeconds += Number(r.byte_seconds ?? 0) / GiB
      else {
        f.vcpuSeconds += Number(r.vcpu_seconds ?? 0)
        f.memoryGiBSeconds += Number(r.mb_seconds ?? 0) / 1024
        f.sandboxSeconds += Number(r.seconds ?? 0)
        f.egressBytes += Number(r.egress ?? 0)
      }
    }
    return out
  }

  /**
   * The egress counters of running sandboxes as their agents report them (bytes sent since their
   * container started, which is when their period started): kept on the open period, never lowered.
   */
  async recordEgress(counters: { id: string; txBytes: number }[]): Promise<void> {
    for (const c of counters) {
      await this.db
        .updateTable('usage_periods')
        .set({ egress_bytes: c.txBytes })
        .where('subject_id', '=', c.id)
        .where('ended_at', 'is', null)
        .where('egress_bytes', '<', c.txBytes)
        .execute()
    }
  }
}
