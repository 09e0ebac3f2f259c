// Freezing idle sandboxes: an idle gVisor sandbox still burns ~2.2% of a core on its own
// timekeeping, so one that no call or proxied connection has touched for `afterMs` is frozen
// through its agent (its freezer cgroup: no CPU at all). The agent freezes only a quiet one (no
// stream or terminal open, little CPU since its last look) and thaws it on any later call.
import type { AgentApi } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { SandboxStore } from '../store/sandboxes.ts'
import type { IdleTracker } from './idle.ts'

/** How often one sandbox that is not frozen yet (busy, or being measured) is asked again. */
const ASK_EVERY_MS = 2_000
/** How long the reaper pass waits for one answer (a host being drained or gone must not hold it). */
const ASK_TIMEOUT_MS = 2_000

export interface FreezerOptions {
  agent: AgentApi
  store: SandboxStore
  idle: IdleTracker
  log: Logger
  /** Idle this long, a quiet sandbox is frozen; 0: never. */
  afterMs: number
}

export class Freezer {
  /** Sandboxes frozen through this replica, with when: not asked again until a call touched them. */
  private readonly frozenAt = new Map<string, number>()
  private readonly askedAt = new Map<string, number>()

  private readonly agent: AgentApi
  private readonly store: SandboxStore
  private readonly idle: IdleTracker
  private readonly log: Logger
  private readonly afterMs: number

  constructor(o: FreezerOptions) {
    this.agent = o.agent
    this.store = o.store
    this.idle = o.idle
    this.log = o.log
    this.afterMs = o.afterMs
  }

  /** One reaper pass: asks the agent to freeze what has been idle long enough. */
  async pass(running: { id: string; persistent: boolean; freeze: boolean; activeAt?: number | null }[], now: number) {
    if (this.afterMs <= 0) return
    const candidates = running.filter((s) => s.freeze)
    for (const { sandbox, idleMs } of this.idle.idle(candidates, now, this.afterMs, { persistentToo: true })) {
      const { id } = sandbox
      const frozen = this.frozenAt.get(id)
      // still frozen unless a call (here, or on another replica) came since
      if (frozen !== undefined && now - idleMs <= frozen) continue
      if (frozen !== undefined) this.thawed(id)
      if (now - (this.askedAt.get(id) ?? 0) < ASK_EVERY_MS) continue
      this.askedAt.set(id, now)
      let ok = false
      try {
        const freezing = this.agent.freeze(id)
        freezing.catch(() => {})
        ok = await Promise.race([
          freezing,
          new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ASK_TIMEOUT_MS).unref()),
        ])
      } catch (err) {
        this.log.debug({ sandboxId: id, err: String(err) }, 'freezing an idle sandbox failed')
      }
      if (!ok) continue
      this.frozenAt.set(id, Date.now())
      await this.store.event(id, 'frozen', `${Math.round(idleMs / 1000)}s without a request`)
    }
  }

  /** A call or a proxied connection reached the sandbox (the agent thaws it for it). */
  touched(id: string): void {
    if (this.frozenAt.has(id)) this.thawed(id)
  }

  private thawed(id: string): void {
    this.frozenAt.delete(id)
    this.store.event(id, 'thawed', '').catch(() => {})
  }

  forget(id: string): void {
    this.frozenAt.delete(id)
    this.askedAt.delete(id)
  }
}
