// Rate limits as token buckets kept in the store, so every replica counts the same calls. Each
// bucket is one number (GCRA: the "theoretical arrival time" of the next call, epoch ms), taken
// and moved in one atomic upsert: a call is allowed while that time runs at most `burst`
// intervals ahead of now, which is a token bucket of `burst` tokens refilled `perSecond`.
import type { RateLimit } from '@forkbox/protocol'
import { sql } from 'kysely'
import type { Db } from './db.ts'
import type { Dialect } from './schema.ts'

export type Taken = { ok: true } | { ok: false; retryAfterMs: number }

export class RateLimiter {
  constructor(
    private readonly db: Db,
    private readonly dialect: Dialect,
  ) {}

  /** Takes a token from `bucket` (made full on first use). */
  async take(bucket: string, limit: RateLimit, now = Date.now()): Promise<Taken> {
    const interval = 1000 / limit.perSecond
    const tolerance = interval * limit.burst
    const later =
      this.dialect === 'postgres'
        ? sql<number>`greatest(rate_limits.tat, ${now})`
        : sql<number>`max(rate_limits.tat, ${now})`
    const next = sql<number>`${later} + ${interval}`
    const row = await this.db
      .insertInto('rate_limits')
      .values({ bucket, tat: now + interval })
      .onConflict((oc) =>
        oc.column('bucket').doUpdateSet({ tat: next }).where(sql<number>`${next} - ${now}`, '<=', tolerance),
      )
      .returning('tat')
      .executeTakeFirst()
    if (row) return { ok: true }
    const held = await this.db.selectFrom('rate_limits').select('tat').where('bucket', '=', bucket).executeTakeFirst()
    const tat = Number(held?.tat ?? now)
    return { ok: false, retryAfterMs: Math.max(1, Math.ceil(Math.max(tat, now) + interval - tolerance - now)) }
  }

  /** Forgets buckets untouched for `olderThanMs` (they are full again by then). */
  async prune(olderThanMs: number, now = Date.now()): Promise<void> {
    await this.db
      .deleteFrom('rate_limits')
      .where('tat', '<', now - olderThanMs)
      .execute()
  }
}
