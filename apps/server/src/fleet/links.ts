// The fleet's hosts as the store has them (read at most once a second) and a connection to each
// one's agent, authenticated with the credential every replica derives from the server secret.
import { createHmac } from 'node:crypto'
import { AppError, type SandboxExitListener } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { HostRow, HostStore } from './hosts-store.ts'
import { type RemoteAgent, remoteAgent } from './remote-agent.ts'

const HOSTS_CACHE_MS = 1_000

/** A host's secret, derived from the server secret and its join's nonce: every replica knows it, nothing stores it. */
export function hostCredential(secret: Buffer, id: string, nonce: string): string {
  return createHmac('sha256', secret).update(`forkbox-host\0${id}\0${nonce}`).digest('base64url')
}

/** What image moves need of the hosts. */
export type Links = Pick<HostLinks, 'rows' | 'isFresh' | 'reachable' | 'agentOf' | 'remote'>

export class HostLinks {
  private readonly remotes = new Map<string, { key: string; agent: RemoteAgent }>()
  private readonly exitListeners: SandboxExitListener[] = []
  private hostsCache: { at: number; rows: Promise<HostRow[]> } | null = null
  private closed = false

  constructor(
    private readonly hosts: HostStore,
    private readonly secret: Buffer,
    private readonly opts: { graceMs: number; log: Logger },
  ) {}

  rows(): Promise<HostRow[]> {
    const now = Date.now()
    if (!this.hostsCache || now - this.hostsCache.at > HOSTS_CACHE_MS) {
      const rows = this.hosts.list()
      rows.catch(() => {
        if (this.hostsCache?.rows === rows) this.hostsCache = null
      })
      this.hostsCache = { at: now, rows }
    }
    return this.hostsCache.rows
  }

  /** The next read sees the store as it is now (after a join, a cordon). */
  forgetHosts(): void {
    this.hostsCache = null
  }

  isFresh(row: HostRow): boolean {
    return Date.now() - Date.parse(row.heartbeat_at) <= this.opts.graceMs
  }

  /** Hosts whose heartbeats stopped (past the grace period). */
  async silentHosts(): Promise<string[]> {
    return (await this.rows()).filter((r) => !this.isFresh(r)).map((r) => r.id)
  }

  /** Hosts that answer heartbeats (cordoned ones included: they still serve what they hold). */
  async reachable(): Promise<HostRow[]> {
    return (await this.rows()).filter((r) => this.isFresh(r))
  }

  remote(row: HostRow): RemoteAgent {
    const key = `${row.url}\0${row.nonce}`
    const known = this.remotes.get(row.id)
    if (known?.key === key) return known.agent
    known?.agent.close().catch(() => {})
    const agent = remoteAgent({
      url: row.url,
      name: row.id,
      credential: async () => hostCredential(this.secret, row.id, row.nonce),
    })
    agent.onExit((id, reason, message) => {
      // a sandbox that died on its own frees its room; a stop's own exit is left to `stop` (the
      // same id may already be starting again, woken)
      if (reason)
        this.hosts.unplace(id).catch((err: unknown) => this.opts.log.error({ err, sandboxId: id }, 'unplacing failed'))
      for (const l of this.exitListeners) l(id, reason, message)
    })
    this.remotes.set(row.id, { key, agent })
    return agent
  }

  /** The agent of host `id` (as the store has it now). */
  async agentOf(hostId: string): Promise<RemoteAgent> {
    const row = (await this.rows()).find((r) => r.id === hostId) ?? (await this.hosts.get(hostId))
    if (!row) throw new AppError('HOST_UNREACHABLE', `no host ${hostId}`, { host: hostId })
    return this.remote(row)
  }

  /** Every reachable host's agent, each call's failure logged and left out. */
  async each<T>(what: string, fn: (a: RemoteAgent, host: string) => Promise<T>): Promise<T[]> {
    const rows = await this.reachable()
    const settled = await Promise.allSettled(rows.map((r) => fn(this.remote(r), r.id)))
    const out: T[] = []
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') out.push(s.value)
      else if (s.reason instanceof AppError && s.reason.code === 'HOST_UNREACHABLE')
        this.opts.log.debug({ host: rows[i]?.id }, `${what}: host unreachable`)
      else this.opts.log.warn({ host: rows[i]?.id, err: s.reason }, `${what} failed on a host`)
    })
    return out
  }

  onExit(listener: SandboxExitListener): void {
    this.exitListeners.push(listener)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all([...this.remotes.values()].map((r) => r.agent.close()))
    this.remotes.clear()
  }
}
