// The audit log: who did what, when, from where. Append-only through this store (no update or
// delete but the retention prune).
import type { AuditEntry } from '@forkbox/protocol'
import type { Db } from './db.ts'

export interface NewAuditEntry {
  keyId: string | null
  action: string
  target: string | null
  status: number
  ip: string | null
  userAgent: string | null
  requestId: string | null
  detail?: Record<string, unknown>
}

/** What a user agent or target may take up in an entry. */
const MAX_TEXT = 512

function cut(text: string | null): string | null {
  return text === null ? null : text.slice(0, MAX_TEXT)
}

export class AuditStore {
  constructor(private readonly db: Db) {}

  async append(e: NewAuditEntry, at = new Date()): Promise<void> {
    await this.db
      .insertInto('audit_log')
      .values({
        at: at.toISOString(),
        key_id: e.keyId,
        action: e.action,
        target: cut(e.target),
        status: e.status,
        ip: cut(e.ip),
        user_agent: cut(e.userAgent),
        request_id: e.requestId,
        detail: e.detail ? JSON.stringify(e.detail) : null,
      })
      .execute()
  }

  /** Entries in id order, after `after`, filtered; at most `limit` (and whether there are more). */
  async list(q: {
    from?: string
    to?: string
    key?: string
    action?: string
    after?: number
    limit: number
  }): Promise<{ entries: AuditEntry[]; next: number | null }> {
    let query = this.db.selectFrom('audit_log').selectAll()
    if (q.from) query = query.where('at', '>=', new Date(q.from).toISOString())
    if (q.to) query = query.where('at', '<', new Date(q.to).toISOString())
    if (q.key) query = query.where('key_id', '=', q.key)
    if (q.action) query = query.where('action', '=', q.action)
    if (q.after !== undefined) query = query.where('id', '>', q.after)
    const rows = await query
      .orderBy('id')
      .limit(q.limit + 1)
      .execute()
    const page = rows.slice(0, q.limit)
    const entries = page.map((r) => ({
      id: Number(r.id),
      at: r.at,
      keyId: r.key_id,
      action: r.action,
      target: r.target,
      status: Number(r.status),
      ip: r.ip,
      userAgent: r.user_agent,
      requestId: r.request_id,
      detail: r.detail ? (JSON.parse(r.detail) as Record<string, unknown>) : null,
    }))
    const last = entries.at(-1)
    return { entries, next: rows.length > q.limit && last ? last.id : null }
  }

  /** Deletes entries older than `before`. */
  async prune(before: Date): Promise<number> {
    const r = await this.db.deleteFrom('audit_log').where('at', '<', before.toISOString()).executeTakeFirst()
    return Number(r.numDeletedRows)
  }
}
