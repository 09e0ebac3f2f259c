// Sandbox rows, their recorded state transitions and events (with a live feed of new ones).

import { EventEmitter } from 'node:events'
import type {
  NetworkPolicy,
  ResolvedResources,
  Sandbox,
  SandboxErrorReason,
  SandboxEvent,
  SandboxEventType,
  SandboxState,
} from '@forkbox/protocol'
import type { Db } from './db.ts'

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
}

/** A sandbox as stored; its access token is derived from the server secret, never stored; its domain is the server's. */
export interface SandboxRecord extends Omit<Sandbox, 'accessToken' | 'domain'> {
  owner: string
  /** While hibernated: the snapshot it wakes from. */
  hibernateSnapshot: string | null
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
  }
}

export function toPublic(r: SandboxRecord): Omit<Sandbox, 'accessToken' | 'domain'> {
  const { owner: _owner, hibernateSnapshot: _snapshot, ...rest } = r
  return rest
}

export class SandboxStore {
  /** Emits 'event' (a SandboxEvent) for every event recorded. */
  readonly bus = new EventEmitter()

  constructor(private readonly db: Db) {
    this.bus.setMaxListeners(0)
  }

  insert(s: {
    id: string
    owner: string
    template: string
    metadata: Record<string, string>
    resources: ResolvedResources
    expiresAt: Date
    persistent: boolean
    network: NetworkPolicy
  }): SandboxRecord {
    const now = new Date().toISOString()
    this.db
      .prepare(
        `insert into sandboxes (id, owner, template, state, metadata, resources, created_at, expires_at, persistent,
           network)
         values (?, ?, ?, 'starting', ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        s.id,
        s.owner,
        s.template,
        JSON.stringify(s.metadata),
        JSON.stringify(s.resources),
        now,
        s.expiresAt.toISOString(),
        s.persistent ? 1 : 0,
        JSON.stringify(s.network),
      )
    this.event(s.id, 'created')
    return this.get(s.id) as SandboxRecord
  }

  setNetwork(id: string, network: NetworkPolicy): void {
    this.db.prepare('update sandboxes set network = ? where id = ?').run(JSON.stringify(network), id)
  }

  get(id: string): SandboxRecord | null {
    const row = this.db.prepare('select * from sandboxes where id = ?').get(id) as SandboxRow | undefined
    return row ? toRecord(row) : null
  }

  list(owner: string | null, filter: { state?: SandboxState; metadata?: Record<string, string> }): SandboxRecord[] {
    const where = owner === null ? ['1 = 1'] : ['owner = ?']
    const args: unknown[] = owner === null ? [] : [owner]
    if (filter.state) {
      where.push('state = ?')
      args.push(filter.state)
    }
    for (const [k, v] of Object.entries(filter.metadata ?? {})) {
      where.push('json_extract(metadata, ?) = ?')
      args.push(`$."${k.replaceAll('"', '""')}"`, v)
    }
    const rows = this.db
      .prepare(`select * from sandboxes where ${where.join(' and ')} order by created_at desc, id`)
      .all(...args) as SandboxRow[]
    return rows.map(toRecord)
  }

  countByState(): { state: SandboxState; template: string; n: number }[] {
    return this.db.prepare('select state, template, count(*) as n from sandboxes group by state, template').all() as {
      state: SandboxState
      template: string
      n: number
    }[]
  }

  countActive(): number {
    return (
      this.db.prepare(`select count(*) as n from sandboxes where state in ('starting', 'running')`).get() as {
        n: number
      }
    ).n
  }

  /** Moves a sandbox from one of `from` to `to`; false when it was in another state. */
  transition(
    id: string,
    from: SandboxState[],
    to: SandboxState,
    event: SandboxEventType,
    extra: { errorReason?: SandboxErrorReason; errorMessage?: string } = {},
  ): boolean {
    const ended = to === 'killed' || to === 'errored' ? new Date().toISOString() : null
    const changed = this.db
      .prepare(
        `update sandboxes set state = ?, ended_at = coalesce(?, ended_at), error_reason = coalesce(?, error_reason),
         error_message = coalesce(?, error_message) where id = ? and state in (${from.map(() => '?').join(',')})`,
      )
      .run(to, ended, extra.errorReason ?? null, extra.errorMessage ?? null, id, ...from).changes
    if (changed > 0) this.event(id, event, extra.errorReason)
    return changed > 0
  }

  setHibernateSnapshot(id: string, snapshotId: string | null): void {
    this.db.prepare('update sandboxes set hibernate_snapshot = ? where id = ?').run(snapshotId, id)
  }

  hibernateSnapshots(): string[] {
    return (
      this.db.prepare('select hibernate_snapshot as s from sandboxes where hibernate_snapshot is not null').all() as {
        s: string
      }[]
    ).map((r) => r.s)
  }

  setExpiry(id: string, expiresAt: Date): void {
    this.db.prepare('update sandboxes set expires_at = ? where id = ?').run(expiresAt.toISOString(), id)
    this.event(id, 'timeout-extended', expiresAt.toISOString())
  }

  expired(now: Date): string[] {
    return (
      this.db
        .prepare(`select id from sandboxes where state in ('starting', 'running', 'hibernated') and expires_at <= ?`)
        .all(now.toISOString()) as { id: string }[]
    ).map((r) => r.id)
  }

  /** Running sandboxes (the idle reaper's candidates). */
  running(): { id: string; owner: string; persistent: boolean }[] {
    return (
      this.db.prepare(`select id, owner, persistent from sandboxes where state = 'running'`).all() as {
        id: string
        owner: string
        persistent: number
      }[]
    ).map((r) => ({ id: r.id, owner: r.owner, persistent: r.persistent === 1 }))
  }

  /** Templates (the agent's names) that sandboxes not yet ended, or snapshots, still start from. */
  templatesInUse(): Set<string> {
    const rows = this.db
      .prepare(
        `select template from sandboxes where state in ('starting', 'running', 'hibernated')
         union select template from snapshots`,
      )
      .all() as { template: string }[]
    return new Set(rows.map((r) => r.template))
  }

  active(): string[] {
    return (
      this.db.prepare(`select id from sandboxes where state in ('starting', 'running')`).all() as { id: string }[]
    ).map((r) => r.id)
  }

  /** Records an event and tells live listeners (`bus`, 'event'). */
  event(id: string, type: SandboxEventType, detail?: string | null): void {
    const at = new Date().toISOString()
    const row = this.db
      .prepare('insert into sandbox_events (sandbox_id, type, at, detail) values (?, ?, ?, ?)')
      .run(id, type, at, detail ?? null)
    if (this.bus.listenerCount('event') === 0) return
    const owner = (this.db.prepare('select owner from sandboxes where id = ?').get(id) as { owner: string } | undefined)
      ?.owner
    if (!owner) return
    const e: SandboxEvent = { id: Number(row.lastInsertRowid), sandboxId: id, owner, type, at, detail: detail ?? null }
    this.bus.emit('event', e)
  }

  /** Events of `owner`'s sandboxes after event id `since`, oldest first. */
  eventsOf(
    owner: string,
    filter: { since?: number; sandboxId?: string; types?: string[]; limit: number },
  ): SandboxEvent[] {
    const where = ['s.owner = ?', 'e.id > ?']
    const args: unknown[] = [owner, filter.since ?? 0]
    if (filter.sandboxId) {
      where.push('e.sandbox_id = ?')
      args.push(filter.sandboxId)
    }
    if (filter.types?.length) {
      where.push(`e.type in (${filter.types.map(() => '?').join(',')})`)
      args.push(...filter.types)
    }
    return this.db
      .prepare(
        `select e.id, e.sandbox_id as sandboxId, s.owner, e.type, e.at, e.detail from sandbox_events e
         join sandboxes s on s.id = e.sandbox_id where ${where.join(' and ')} order by e.id limit ?`,
      )
      .all(...args, filter.limit) as SandboxEvent[]
  }

  /** Drops events older than `before` (the retention window). */
  pruneEvents(before: Date): number {
    return this.db.prepare('delete from sandbox_events where at < ?').run(before.toISOString()).changes
  }

  events(id: string): Pick<SandboxEvent, 'type' | 'at' | 'detail'>[] {
    return this.db
      .prepare('select type, at, detail from sandbox_events where sandbox_id = ? order by id')
      .all(id) as Pick<SandboxEvent, 'type' | 'at' | 'detail'>[]
  }
}
