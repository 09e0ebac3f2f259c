// One long-lived Postgres session of a replica, for what a pooled query cannot do: LISTEN (events
// made on other replicas) and a session advisory lock (the one replica that runs the reapers).
// It reconnects by itself; while it is down, this replica is not the leader and hears nothing.
import pg from 'pg'
import type { Logger } from 'pino'

const RECONNECT_MS = 1_000

export class PgSession {
  private client: pg.Client | null = null
  private connecting: Promise<pg.Client | null> | null = null
  private readonly channels = new Map<string, (payload: string) => void>()
  private leading = new Set<number>()
  private closed = false

  constructor(
    private readonly url: string,
    private readonly log: Logger,
  ) {}

  private connect(): Promise<pg.Client | null> {
    if (this.client) return Promise.resolve(this.client)
    this.connecting ??= this.open().finally(() => {
      this.connecting = null
    })
    return this.connecting
  }

  private async open(): Promise<pg.Client | null> {
    if (this.closed) return null
    const client = new pg.Client({ connectionString: this.url })
    // a dropped session is an 'error' then an 'end': leadership and subscriptions are gone with it
    client.on('error', (err) => this.log.warn({ err: err.message }, 'the store session failed'))
    client.on('end', () => {
      if (this.client !== client) return
      this.client = null
      this.leading.clear()
      if (!this.closed) setTimeout(() => this.connect().catch(() => {}), RECONNECT_MS).unref()
    })
    client.on('notification', (n) => {
      if (n.payload !== undefined) this.channels.get(n.channel)?.(n.payload)
    })
    try {
      await client.connect()
      for (const ch of this.channels.keys()) await client.query(`LISTEN "${ch}"`)
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'the store session could not connect')
      client.end().catch(() => {})
      if (!this.closed) setTimeout(() => this.connect().catch(() => {}), RECONNECT_MS).unref()
      return null
    }
    if (this.closed) {
      await client.end().catch(() => {})
      return null
    }
    this.client = client
    return client
  }

  /** Calls `onPayload` for each NOTIFY on `channel` (a plain identifier), from any replica. */
  async listen(channel: string, onPayload: (payload: string) => void): Promise<void> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`)
    this.channels.set(channel, onPayload)
    // never fails: a session that is down LISTENs again to every channel when it reconnects
    const c = await this.connect().catch(() => null)
    await c?.query(`LISTEN "${channel}"`).catch(() => {})
  }

  /** Whether this replica holds lock `key` now (taking it when it is free); held until the session ends. */
  async lead(key: number): Promise<boolean> {
    const c = await this.connect().catch(() => null)
    if (!c) return false
    if (this.leading.has(key)) return true
    try {
      const r = await c.query<{ got: boolean }>('select pg_try_advisory_lock($1) as got', [key])
      if (r.rows[0]?.got) this.leading.add(key)
      return this.leading.has(key)
    } catch {
      return false
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const c = this.client
    this.client = null
    this.leading.clear()
    await c?.end().catch(() => {})
  }
}
