// Hibernation and waking: a sandbox's image written and the sandbox stopped (its calls wake it,
// once however many callers and replicas), a live migration to another host, and the wait for a
// wake another replica does. Never a sandbox lost to a failed wake: it stays hibernated.
import { randomBytes } from 'node:crypto'
import { type AgentApi, AppError, DEFAULT_TTL_SECONDS } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.ts'
import type { SandboxRecord, SandboxStore } from '../store/sandboxes.ts'
import { egressOf } from './network-policy.ts'
import type { QuotaGuard } from './quotas.ts'
import { mustRun, ownRecord } from './sandbox-records.ts'

/** How long a call waits for another replica's wake of its sandbox. */
const WAKE_WAIT_MS = 120_000

export interface HibernationOptions {
  store: SandboxStore
  agent: AgentApi
  log: Logger
  quotas: QuotaGuard | null
  metrics?: Metrics
}

export class Hibernation {
  private readonly waking = new Map<string, Promise<void>>()
  private readonly hibernating = new Map<string, Promise<void>>()

  constructor(private readonly o: HibernationOptions) {}

  /** Whether this replica is waking the sandbox now (recovery leaves such a one alone). */
  isWaking(id: string): boolean {
    return this.waking.has(id)
  }

  /** Resolves once a hibernation of the sandbox under way (if any) has ended, however it ended. */
  async settled(id: string): Promise<void> {
    await this.hibernating.get(id)?.catch(() => {})
  }

  /** Hibernates it, joining a hibernation already under way. */
  hibernateNow(id: string, keepMemory = true): Promise<void> {
    let p = this.hibernating.get(id)
    if (!p) {
      p = this.checkpointAndStop(id, keepMemory).finally(() => this.hibernating.delete(id))
      this.hibernating.set(id, p)
    }
    return p
  }

  /**
   * Image first (the sandbox keeps running), then the record, then the stop: a crash at any point
   * leaves either a running sandbox (re-attached on restart) or a hibernated one with a whole image.
   */
  private async checkpointAndStop(id: string, keepMemory = true): Promise<void> {
    const snapshotId = `hib-${randomBytes(10).toString('hex')}`
    const template = keepMemory ? undefined : (await this.o.store.get(id))?.template
    await this.o.agent.snapshot(id, snapshotId, { final: true, ...(template ? { freshStart: { template } } : {}) })
    await this.o.store.setHibernateSnapshot(id, snapshotId)
    if (!(await this.o.store.transition(id, ['running'], 'hibernated', 'hibernated'))) {
      // killed while it was being written
      await this.o.store.setHibernateSnapshot(id, null)
      await this.o.agent.deleteSnapshot(snapshotId)
      return
    }
    // its teardown goes on in the background; a wake restores under a fresh container name
    await this.o.agent.stop(id)
  }

  /**
   * Moves a running sandbox off its host (live migration): checkpointed and stopped there, then
   * woken where the fleet places it now (its host being cordoned, elsewhere). Same id, policy and
   * ports; a client sees a pause, calls made meanwhile wait for the wake.
   */
  async migrate(id: string): Promise<void> {
    const s = await this.o.store.get(id)
    if (s?.state !== 'running') return
    let p = this.hibernating.get(id)
    if (!p) {
      p = this.checkpointAndStop(id).finally(() => this.hibernating.delete(id))
      this.hibernating.set(id, p)
    }
    await p
    await this.awake(s.owner, id)
  }

  /** The sandbox, running: a hibernated one is woken first (one wake however many callers). */
  async awake(owner: string, id: string): Promise<SandboxRecord> {
    // a request that arrives while the sandbox is being hibernated wakes it once that is done
    const hibernating = this.hibernating.get(id)
    if (hibernating) await hibernating.catch(() => {})
    const s = await ownRecord(this.o.store, owner, id)
    // one read of the record on the hot path (exec, files); a second only after a wake
    if (s.state === 'starting' && s.hibernateSnapshot) return this.untilWoken(owner, id)
    if (s.state !== 'hibernated') return mustRun(s)
    let wake = this.waking.get(id)
    if (!wake) {
      wake = this.wake(s).finally(() => this.waking.delete(id))
      this.waking.set(id, wake)
    }
    await wake
    return mustRun(await ownRecord(this.o.store, owner, id))
  }

  /** Waits while another replica wakes the sandbox (its record `starting` with an image). */
  private async untilWoken(owner: string, id: string): Promise<SandboxRecord> {
    for (let waited = 0; waited < WAKE_WAIT_MS; waited += 100) {
      const s = await ownRecord(this.o.store, owner, id)
      if (!(s.state === 'starting' && s.hibernateSnapshot))
        return s.state === 'hibernated' ? this.awake(owner, id) : mustRun(s)
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new AppError('SANDBOX_MOVING', `sandbox ${id} is still waking; retry`)
  }

  private async wake(s: SandboxRecord): Promise<void> {
    const snapshotId = s.hibernateSnapshot
    if (!snapshotId) throw new AppError('INTERNAL', `hibernated sandbox ${s.id} has no image`)
    // one replica wakes it: the others wait for the record to say running; it counts against its
    // key's quotas again (its disk it held all along)
    const r = s.resources
    const ask = { sandboxes: 1, vcpus: r.vcpus, memoryMB: r.memoryMB }
    const claim = () => this.o.store.claim(s.id, 'hibernated', 'starting')
    if (!(await (this.o.quotas ? this.o.quotas.admit(s.owner, ask, claim) : claim()))) {
      await this.untilWoken(s.owner, s.id)
      return
    }
    const started = performance.now()
    try {
      await this.o.agent.start({
        id: s.id,
        template: s.template,
        resources: s.resources,
        envs: {},
        snapshot: snapshotId,
        network: egressOf(s.network),
      })
    } catch (err) {
      // no host can take it now, its image's host does not answer, or its restore failed (its
      // runsc killed, the host out of memory): it stays hibernated, its image kept, and a later
      // call wakes it again; a sandbox is never lost to a failed wake
      await this.o.store.claim(s.id, 'starting', 'hibernated')
      const message = err instanceof Error ? err.message : String(err)
      this.o.log.warn({ sandboxId: s.id, err: message }, 'a wake failed; the sandbox stays hibernated')
      throw err instanceof AppError ? err : new AppError('INTERNAL', `the sandbox failed to wake: ${message}`)
    }
    if (!(await this.o.store.transition(s.id, ['starting'], 'running', 'woke'))) {
      await this.o.agent.stop(s.id) // killed while waking
      return
    }
    await this.o.store.setHibernateSnapshot(s.id, null)
    await this.o.agent.deleteSnapshot(snapshotId)
    // a sandbox that hibernates at its timeout lives its TTL again from its wake
    if (s.onTimeout !== 'kill') {
      const ttl = s.ttlSeconds ?? DEFAULT_TTL_SECONDS
      await this.o.store.setExpiry(s.id, new Date(Date.now() + ttl * 1000))
    }
    this.o.metrics?.wakeSeconds.observe((performance.now() - started) / 1000)
    this.o.log.info({ sandboxId: s.id, ms: Math.round(performance.now() - started) }, 'sandbox woke')
  }
}
