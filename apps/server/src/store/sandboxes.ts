// Sandbox rows, their recorded state transitions and events (with a live feed of new ones).

import { EventEmitter } from 'node:events'
import {
  type NetworkPolicy,
  OnTimeout,
  type ResolvedResources,
  type Sandbox,
  type SandboxErrorReason,
  type SandboxEvent,
  type SandboxEventType,
  type SandboxState,
} from '@forkbox/protocol'
import { sql, type Transaction } from 'kysely'
import type { Db } from './db.ts'
import type { PgSession } from './pg-session.ts'
import type { Dialect, Schema } from './schema.ts'
import { closePeriod, METERED_STATES, openSandboxPeriod } from './usage.ts'

interface SandboxRow {
  id: string
  owner: string
  template: string
  state: SandboxState
  metadata: string
  resources: string
  created_at: string
  expires_at: string
  ended_at: string | null
  error_reason: SandboxErrorReason | null
  error_message: string | null
  hibernate_snapshot: string | null
  persistent: number
  network: string
  on_timeout: string
  ttl_seconds: number | null
  freeze: number
}

/** A sandbox as stored; its access token is derived from the server secret, never stored; its domain is the server's. */
export interface SandboxRecord extends Omit<Sandbox, 'accessToken' | 'domain'> {
  owner: string
  /** While hibernated: the snapshot it wakes from. */
  hibernateSnapshot: string | null
  /** Its TTL as last set (null: made before this was kept). */
  ttlSeconds: number | null
}

/** The stored `on_timeout`, as the API names it (`kill` for anything else). */
function onTimeoutOf(value: string): OnTimeout {
  const parsed = OnTimeout.safeParse(value)
  return parsed.success ? parsed.data : 'kill'
}

function toRecord(r: SandboxRow): SandboxRecord {
  return {
    id: r.id,
    owner: r.owner,
    template: r.template,
    state: r.state,
    metadata: JSON.parse(r.metadata),
    resources: JSON.parse(r.resources),
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    endedAt: r.ended_at,
    errorReason: r.error_reason,
    errorMessage: r.error_message,
    hibernateSnapshot: r.hibernate_snapshot,
    persistent: r.persistent === 1,
    network: JSON.parse(r.network),
    onTimeout: onTimeoutOf(r.on_timeout),
    ttlSeconds: r.ttl_seconds === null ? null : Number(r.ttl_seconds),
    freeze: Number(r.freeze) !== 0,
  }
}

export function toPublic(r: SandboxRecord): Omit<Sandbox, 'accessToken' | 'domain'> {
  const { owner: _owner, hibernateSnapshot: _snapshot, ttlSeconds: _ttl, ...rest } = r
  return rest
}

const EVENTS_CHANNEL = 'forkbox_events'

export class SandboxStore {
  /** Emits 'event' (a SandboxEvent) for every event recorded. */
  readonly bus = new EventEmitter()

  /** Relayed events, in the order their notifications came. */
  private relayed: Promise<void> = Promise.resolve()

  constructor(
    private readonly db: Db,
    private readonly dialect: Dialect,
    /** Postgres: events reach `bus` through NOTIFY, so every replica hears every replica's. */
    private readonly session: PgSession | null = null,
  ) {
    this.bus.setMaxListeners(0)
    void session?.listen(EVENTS_CHANNEL, (payload) => {
      const id = Number(payload)
      if (!Number.isSafeInteger(id)) return
      this.relayed = this.relayed.then(() => this.relay(id)).catch(() => {})
    })
  }

  private async relay(eventId: number): Promise<void> {
    if (this.bus.listenerCount('event') === 0) return
    const r = await this.db
      .selectFrom('sandbox_events as e')
      .innerJoin('sandboxes as s', 's.id', 'e.sandbox_id')
      .select(['e.id', 'e.sandbox_id', 's.owner', 'e.type', 'e.at', 'e.detail'])
      .where('e.id', '=', eventId)
      .executeTakeFirst()
    if (!r) return
    this.bus.emit('event', {
      id: Number(r.id),
      sandboxId: r.sandbox_id,
      owner: r.owner,
      type: r.type as SandboxEventType,
      at: r.at,
      detail: r.detail,
    } satisfies SandboxEvent)
  }

  async insert(s: {
    id: string
    owner: string
    template: string
    metadata: Record<string, string>
    resources: ResolvedResources
    expiresAt: Date
    persistent: boolean
    network: NetworkPolicy
    onTimeout?: OnTimeout
    ttlSeconds?: number
    freeze?: boolean
  }): Promise<SandboxRecord> {
    const createdAt = new Date().toISOString()
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('sandboxes')
        .values({
          id: s.id,
          owner: s.owner,
          template: s.template,
          state: 'starting',
          metadata: JSON.stringify(s.metadata),
          resources: JSON.stringify(s.resources),
          created_at: createdAt,
          expires_at: s.expiresAt.toISOString(),
          persistent: s.persistent ? 1 : 0,
          network: JSON.stringify(s.network),
          on_timeout: s.onTimeout ?? 'kill',
          ttl_seconds: s.ttlSeconds ?? null,
          freeze: s.freeze === false ? 0 : 1,
        })
        .execute()
      await openSandboxPeriod(trx, s, createdAt)
    })
    await this.event(s.id, 'created')
    return (await this.get(s.id)) as SandboxRecord
  }

  async setNetwork(id: string, network: NetworkPolicy): Promise<void> {
    await this.db
      .updateTable('sandboxes')
      .set({ network: JSON.stringify(network) })
      .where('id', '=', id)
      .execute()
  }

  async get(id: string): Promise<SandboxRecord | null> {
    const row = await this.db.selectFrom('sandboxes').selectAll().where('id', '=', id).executeTakeFirst()
    return row ? toRecord(row as SandboxRow) : null
  }

  async list(
    owner: string | null,
    filter: { state?: SandboxState; metadata?: Record<string, string> },
  ): Promise<SandboxRecord[]> {
    let q = this.db.selectFrom('sandboxes').selectAll()
    if (owner !== null) q = q.where('owner', '=', owner)
    if (filter.state) q = q.where('state', '=', filter.state)
    for (const [k, v] of Object.entries(filter.metadata ?? {})) {
      const value =
        this.dialect === 'postgres'
          ? sql<string>`(metadata::jsonb ->> ${k})`
          : sql<string>`json_extract(metadata, ${`$."${k.replaceAll('"', '""')}"`})`
      q = q.where(value, '=', v)
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id').execute()
    return rows.map((r) => toRecord(r as SandboxRow))
  }

  async countByState(): Promise<{ state: SandboxState; template: string; n: number }[]> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select(['state', 'template', (e) => e.fn.countAll<number>().as('n')])
      .groupBy(['state', 'template'])
      .execute()
    return rows.map((r) => ({ state: r.state as SandboxState, template: r.template, n: Number(r.n) }))
  }

  async countActive(): Promise<number> {
    const r = await this.db
      .selectFrom('sandboxes')
      .select((e) => e.fn.countAll<number>().as('n'))
      .where('state', 'in', ['starting', 'running'])
      .executeTakeFirstOrThrow()
    return Number(r.n)
  }

  /** Moves a sandbox from one of `from` to `to`; false when it was in another state. */
  async transition(
    id: string,
    from: SandboxState[],
    to: SandboxState,
    event: SandboxEventType,
    extra: { errorReason?: SandboxErrorReason; errorMessage?: string } = {},
  ): Promise<boolean> {
    const now = new Date().toISOString()
    const ended = to === 'killed' || to === 'errored' ? now : null
    const changed = await this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('sandboxes')
        .set((e) => ({
          state: to,
          ended_at: e.fn.coalesce(sql.val(ended), e.ref('ended_at')),
          error_reason: e.fn.coalesce(sql.val(extra.errorReason ?? null), e.ref('error_reason')),
          error_message: e.fn.coalesce(sql.val(extra.errorMessage ?? null), e.ref('error_message')),
        }))
        .where('id', '=', id)
        .where('state', 'in', from)
        .executeTakeFirst()
      if (Number(r.numUpdatedRows) === 0) return false
      await this.meter(trx, id, to, now)
      return true
    })
    if (changed) await this.event(id, event, extra.errorReason)
    return changed
  }

  /** Moves a sandbox from `from` to `to` with no event (a wake claimed by one replica); false when it was not in `from`. */
  async claim(id: string, from: SandboxState, to: SandboxState): Promise<boolean> {
    const now = new Date().toISOString()
    return this.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('sandboxes')
        .set({ state: to, active_at: now })
        .where('id', '=', id)
        .where('state', '=', from)
        .executeTakeFirst()
      if (Number(r.numUpdatedRows) === 0) return false
      await this.meter(trx, id, to, now)
      return true
    })
  }

  /** A sandbox entered `to`: its usage period opens (starting, running) or closes (any other state). */
  private async meter(trx: Transaction<Schema>, id: string, to: SandboxState, at: string): Promise<void> {
    if (!(METERED_STATES as readonly string[]).includes(to)) return closePeriod(trx, id, at)
    const row = await trx.selectFrom('sandboxes').select(['owner', 'resources']).where('id', '=', id).executeTakeFirst()
    if (row) await openSandboxPeriod(trx, { id, owner: row.owner, resources: JSON.parse(row.resources) }, at)
  }

  async setHibernateSnapshot(id: string, snapshotId: string | null): Promise<void> {
    await this.db.updateTable('sandboxes').set({ hibernate_snapshot: snapshotId }).where('id', '=', id).execute()
  }

  async hibernateSnapshots(): Promise<string[]> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select('hibernate_snapshot')
      .where('hibernate_snapshot', 'is not', null)
      .execute()
    return rows.map((r) => r.hibernate_snapshot as string)
  }

  /** Moves its end to `expiresAt`; `ttlSeconds`: the TTL it was set from, which a wake after a timeout's hibernation starts again. */
  async setExpiry(id: string, expiresAt: Date, ttlSeconds?: number): Promise<void> {
    await this.db
      .updateTable('sandboxes')
      .set({ expires_at: expiresAt.toISOString(), ...(ttlSeconds === undefined ? {} : { ttl_seconds: ttlSeconds }) })
      .where('id', '=', id)
      .execute()
    await this.event(id, 'timeout-extended', expiresAt.toISOString())
  }

  /** Sandboxes alive past their TTL, with what the TTL does to each. */
  async expired(now: Date): Promise<{ id: string; state: SandboxState; onTimeout: OnTimeout }[]> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select(['id', 'state', 'on_timeout'])
      .where('state', 'in', ['starting', 'running', 'hibernated', 'lost'])
      .where('expires_at', '<=', now.toISOString())
      .execute()
    return rows.map((r) => ({
      id: r.id,
      state: r.state as SandboxState,
      onTimeout: onTimeoutOf(r.on_timeout),
    }))
  }

  /** Running sandboxes (the idle reaper's candidates). */
  async running(): Promise<
    { id: string; owner: string; persistent: boolean; freeze: boolean; activeAt: number | null }[]
  > {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select(['id', 'owner', 'persistent', 'freeze', 'active_at'])
      .where('state', '=', 'running')
      .execute()
    return rows.map((r) => ({
      id: r.id,
      owner: r.owner,
      persistent: Number(r.persistent) === 1,
      freeze: Number(r.freeze) !== 0,
      activeAt: r.active_at ? Date.parse(r.active_at) : null,
    }))
  }

  /** Records that calls of these sandboxes were seen (now). */
  async touch(ids: string[], at: Date): Promise<void> {
    if (ids.length === 0) return
    await this.db.updateTable('sandboxes').set({ active_at: at.toISOString() }).where('id', 'in', ids).execute()
  }

  /** Templates (the agent's names) that sandboxes not yet ended, or snapshots, still start from. */
  async templatesInUse(): Promise<Set<string>> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select('template')
      .where('state', 'in', ['starting', 'running', 'hibernated'])
      .union(this.db.selectFrom('snapshots').select('template'))
      .execute()
    return new Set(rows.map((r) => r.template))
  }

  /** Sandboxes `starting` since before `cutoff` (created, or claimed for a wake): their replica went away. */
  async stuckStarting(cutoff: Date): Promise<{ id: string; waking: boolean }[]> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select(['id', 'hibernate_snapshot', 'created_at', 'active_at'])
      .where('state', '=', 'starting')
      .execute()
    const at = cutoff.getTime()
    return rows
      .filter((r) => Date.parse(r.active_at ?? r.created_at) < at)
      .map((r) => ({ id: r.id, waking: r.hibernate_snapshot !== null }))
  }

  async active(): Promise<string[]> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select('id')
      .where('state', 'in', ['starting', 'running'])
      .execute()
    return rows.map((r) => r.id)
  }

  /** Records an event and tells live listeners (`bus`, 'event'). */
  async event(id: string, type: SandboxEventType, detail?: string | null): Promise<void> {
    const at = new Date().toISOString()
    const row = await this.db
      .insertInto('sandbox_events')
      .values({ sandbox_id: id, type, at, detail: detail ?? null })
      .returning('id')
      .executeTakeFirstOrThrow()
    if (this.session) {
      await sql`select pg_notify(${EVENTS_CHANNEL}, ${String(row.id)})`.execute(this.db)
      return
    }
    if (this.bus.listenerCount('event') === 0) return
    const owner = (await this.db.selectFrom('sandboxes').select('owner').where('id', '=', id).executeTakeFirst())?.owner
    if (!owner) return
    const e: SandboxEvent = { id: Number(row.id), sandboxId: id, owner, type, at, detail: detail ?? null }
    this.bus.emit('event', e)
  }

  /** Events of `owner`'s sandboxes after event id `since`, oldest first. */
  async eventsOf(
    owner: string,
    filter: { since?: number; sandboxId?: string; types?: string[]; limit: number },
  ): Promise<SandboxEvent[]> {
    let q = this.db
      .selectFrom('sandbox_events as e')
      .innerJoin('sandboxes as s', 's.id', 'e.sandbox_id')
      .select(['e.id', 'e.sandbox_id as sandboxId', 's.owner', 'e.type', 'e.at', 'e.detail'])
      .where('s.owner', '=', owner)
      .where('e.id', '>', filter.since ?? 0)
    if (filter.sandboxId) q = q.where('e.sandbox_id', '=', filter.sandboxId)
    if (filter.types?.length) q = q.where('e.type', 'in', filter.types)
    const rows = await q.orderBy('e.id').limit(filter.limit).execute()
    return rows.map((r) => ({ ...r, id: Number(r.id), type: r.type as SandboxEventType }))
  }

  /** Drops events older than `before` (the retention window). */
  async pruneEvents(before: Date): Promise<number> {
    const r = await this.db.deleteFrom('sandbox_events').where('at', '<', before.toISOString()).executeTakeFirst()
    return Number(r.numDeletedRows)
  }

  async events(id: string): Promise<Pick<SandboxEvent, 'type' | 'at' | 'detail'>[]> {
    const rows = await this.db
      .selectFrom('sandbox_events')
      .select(['type', 'at', 'detail'])
      .where('sandbox_id', '=', id)
      .orderBy('id')
      .execute()
    return rows.map((r) => ({ ...r, type: r.type as SandboxEventType }))
  }
}
