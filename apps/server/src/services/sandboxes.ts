// Sandbox lifecycle and operations: ownership, state checks and limits here, the work in the agent.
import { randomBytes } from 'node:crypto'
import {
  type AgentApi,
  AppError,
  type CreateSandboxRequest,
  DEFAULT_TTL_SECONDS,
  MAX_TTL_SECONDS,
  type NetworkOptions,
  type ResolvedResources,
  type Resources,
  type Sandbox,
  type SandboxState,
  type Snapshot,
  type TemplateInfo,
} from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { Authenticator } from '../http/auth.ts'
import type { Metrics } from '../metrics.ts'
import { type SandboxRecord, type SandboxStore, toPublic } from '../store/sandboxes.ts'
import type { SnapshotRecord, SnapshotStore } from '../store/snapshots.ts'
import { Freezer } from './freezer.ts'
import { IdleTracker } from './idle.ts'
import { type ForkInput, Launcher } from './launch.ts'
import { egressOf, resolveNetwork } from './network-policy.ts'
import type { QuotaGuard } from './quotas.ts'

type CreateInput = Required<Omit<CreateSandboxRequest, 'resources' | 'snapshot' | 'network'>> & {
  resources: Resources
  snapshot?: string
  network: NetworkOptions
}

/** How long a call waits for another replica's wake of its sandbox. */
const WAKE_WAIT_MS = 120_000

export class SandboxService {
  private readonly stopping = new Set<Promise<void>>()
  private readonly waking = new Map<string, Promise<void>>()
  private readonly idle: IdleTracker
  private readonly freezer: Freezer
  private readonly hibernating = new Map<string, Promise<void>>()
  private readonly launcher: Launcher
  private readonly quotas: QuotaGuard | null

  constructor(
    private readonly store: SandboxStore,
    private readonly agent: AgentApi,
    private readonly log: Logger,
    private readonly limits: {
      maxSandboxes: number
      idleTimeoutMs?: number
      idleAction?: 'hibernate' | 'kill'
      /** Idle this long (no call, no proxied connection), a sandbox is frozen if quiet; 0 or none: never. */
      freezeAfterMs?: number
      /** Exposed ports are served under it (see `Sandbox.domain`). */
      sandboxDomain: string
      /** How long a call refused as its sandbox moved (it never started) is sent again. */
      movingRetryMs?: number
      /**
       * A fleet: sandboxes run on other machines (their ports are reached through their agents)
       * and other replicas serve them too (calls seen here are shared through the store).
       */
      fleet?: boolean
      /** A key's scopes and quotas (none: no key has any). */
      quotas?: QuotaGuard
    },
    private readonly snapshots: SnapshotStore,
    private readonly auth: Authenticator,
    private readonly metrics?: Metrics,
    /** What the agent calls the template a create names (a user's template, a version, a built-in). */
    private readonly resolveTemplate: (owner: string, ref: string) => Promise<string> = async (_owner, ref) => ref,
    /** How a template (the agent's name) is shown: a user's as `name@version`. */
    private readonly templateLabel: (agentName: string) => Promise<string> = async (name) => name,
  ) {
    this.idle = new IdleTracker(limits.fleet === true)
    this.freezer = new Freezer(agent, store, this.idle, log, limits.freezeAfterMs ?? 0)
    this.quotas = limits.quotas ?? null
    this.launcher = new Launcher(
      store,
      agent,
      log,
      limits.maxSandboxes,
      (owner, id) => this.get(owner, id),
      metrics,
      this.quotas,
    )
    agent.onExit((id, reason, message) => {
      if (!reason) return
      const extra = { errorReason: reason, errorMessage: message ?? undefined }
      this.store
        .transition(id, ['starting', 'running'], 'errored', 'errored', extra)
        .then((changed) => changed && this.log.warn({ sandboxId: id, reason }, 'sandbox errored'))
        .catch((err: unknown) => this.log.error({ sandboxId: id, err }, 'recording an exit failed'))
    })
  }

  private async templateInfo(template: string): Promise<TemplateInfo> {
    const find = async () => (await this.agent.templates()).find((t) => t.name === template)
    let info = await find()
    if (!info) {
      // a fleet answers templates from a cache of a second or two: a template just built through
      // another replica is asked for again (ensureTemplate refreshes it) before it counts as unknown
      await this.agent.ensureTemplate(template).catch(() => {})
      info = await find()
    }
    if (!info) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${template}`)
    if (info.ready) return info
    // a template built on first use (a built-in Dockerfile's) knows its image config, EXPOSE
    // included, only once built
    await this.agent.ensureTemplate(template)
    return (await find()) ?? info
  }

  private resolveResources(info: TemplateInfo, asked: Resources): ResolvedResources {
    const template = info.name
    const r = { ...info.defaults, ...asked }
    for (const k of ['vcpus', 'memoryMB', 'diskMB', 'pids'] as const) {
      if (r[k] > info.maxima[k])
        throw new AppError(
          'RESOURCE_LIMIT_EXCEEDED',
          `${k} ${r[k]} is above template ${template}'s maximum ${info.maxima[k]}`,
          {
            resource: k,
            maximum: info.maxima[k],
          },
        )
    }
    return r
  }

  async create(owner: string, req: CreateInput, signal?: AbortSignal): Promise<Sandbox> {
    const network = resolveNetwork(req.network)
    if (!req.snapshot) {
      await this.quotas?.checkScopes(owner, { template: req.template })
      const template = await this.resolveTemplate(owner, req.template)
      const info = await this.templateInfo(template)
      const resources = this.resolveResources(info, req.resources)
      // the image's EXPOSE, unless the create names its ports
      if (req.network.ports === undefined && info.exposedPorts) network.ports = [...info.exposedPorts]
      await this.quotas?.checkScopes(owner, { network })
      return this.launcher.launch(owner, { ...req, template, resources, snapshot: undefined, network }, signal)
    }
    const snap = await this.ownSnapshot(owner, req.snapshot)
    await this.quotas?.checkScopes(owner, { template: await this.templateLabel(snap.template), network })
    if (Object.keys(req.resources).length > 0)
      throw new AppError('VALIDATION_FAILED', 'a sandbox started from a snapshot has the resources of the snapshot')
    return this.launcher.launch(
      owner,
      { ...req, template: snap.template, resources: snap.resources, snapshot: snap.id, network },
      signal,
    )
  }

  /** The owner's snapshot with this id, or this name. */
  private async ownSnapshot(owner: string, idOrName: string): Promise<SnapshotRecord> {
    const byId = await this.snapshots.get(idOrName)
    const snap = byId?.owner === owner ? byId : await this.snapshots.named(owner, idOrName)
    if (!snap) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${idOrName}`)
    return snap
  }

  /** Whether the owner has a snapshot with this id or name (E2B starts from either by its template field). */
  async hasSnapshot(owner: string, idOrName: string): Promise<boolean> {
    return this.ownSnapshot(owner, idOrName).then(
      () => true,
      () => false,
    )
  }

  /** Memory, processes and disk of a running sandbox, kept; the sandbox carries on. */
  async snapshot(owner: string, id: string, opts: { name?: string } = {}): Promise<Snapshot> {
    await this.quotas?.checkSnapshotBytes(owner)
    const src = await this.awake(owner, id)
    const snapshotId = `snap-${randomBytes(10).toString('hex')}`
    const { sizeBytes } = await this.busyWith(id, () => this.agent.snapshot(id, snapshotId))
    try {
      await this.quotas?.checkSnapshotBytes(owner, sizeBytes)
    } catch (err) {
      // past the quota once taken: it is not kept
      await this.agent.deleteSnapshot(snapshotId)
      throw err
    }
    const snap = await this.snapshots.insert({
      id: snapshotId,
      name: opts.name ?? null,
      owner,
      sandboxId: id,
      template: src.template,
      resources: src.resources,
      sizeBytes,
    })
    await this.store.event(id, 'snapshotted', snapshotId)
    const { owner: _owner, ...rest } = snap
    return rest
  }

  async listSnapshots(owner: string, filter: { name?: string } = {}): Promise<Snapshot[]> {
    return (await this.snapshots.list(owner, filter)).map(({ owner: _owner, ...rest }) => rest)
  }

  async deleteSnapshot(owner: string, idOrName: string): Promise<void> {
    const { id } = await this.ownSnapshot(owner, idOrName)
    await this.snapshots.delete(id)
    await this.agent.deleteSnapshot(id)
  }

  /**
   * `count` new sandboxes from the live state of `id` (which keeps running). All or nothing: if
   * one fails to start, those already started are killed.
   */
  async fork(owner: string, id: string, req: ForkInput): Promise<Sandbox[]> {
    const src = await this.awake(owner, id)
    await this.quotas?.checkScopes(owner, { template: await this.templateLabel(src.template), network: src.network })
    return this.busyWith(id, () => this.launcher.fork(owner, src, req, (fork) => this.end(fork, 'killed')))
  }

  /** Counts the sandbox busy (neither reaped as idle nor frozen) until the returned release. */
  hold(id: string): () => void {
    const release = this.idle.hold(id)
    this.freezer.touched(id)
    return release
  }

  /** Runs `fn` with the sandbox counted busy: neither reaped as idle nor frozen meanwhile. */
  async busyWith<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const release = this.hold(id)
    try {
      return await fn()
    } finally {
      release()
    }
  }

  /** Throws what a call on the sandbox would: not this owner's, or neither running nor hibernated. */
  async check(owner: string, id: string): Promise<void> {
    const s = await this.own(owner, id)
    if (s.state !== 'hibernated') this.mustRun(s)
  }

  /** The API's view of a sandbox, with its exposed-port token (derived, never stored). */
  private async public(s: SandboxRecord): Promise<Sandbox> {
    return {
      ...toPublic(s),
      template: await this.templateLabel(s.template),
      accessToken: this.auth.token('port', s.id),
      domain: this.limits.sandboxDomain,
    }
  }

  /** The key that owns sandbox `id`, or null when there is no such sandbox. */
  async ownerOf(id: string): Promise<string | null> {
    return (await this.store.get(id))?.owner ?? null
  }

  private async own(owner: string, id: string): Promise<SandboxRecord> {
    const s = await this.store.get(id)
    if (!s || s.owner !== owner) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${id}`)
    return s
  }

  async get(owner: string, id: string): Promise<Sandbox> {
    return this.public(await this.own(owner, id))
  }

  /** `owner` null: every key's (an admin's view). */
  async list(
    owner: string | null,
    filter: { state?: SandboxState; metadata?: Record<string, string> },
  ): Promise<Sandbox[]> {
    return Promise.all((await this.store.list(owner, filter)).map((s) => this.public(s)))
  }

  /** The owner's sandbox, running (else what a call on it would throw). */
  async running(owner: string, id: string): Promise<SandboxRecord> {
    return this.mustRun(await this.own(owner, id))
  }

  private mustRun(s: SandboxRecord): SandboxRecord {
    if (s.state === 'running') return s
    if (s.state === 'lost')
      throw new AppError('HOST_UNREACHABLE', `the host of sandbox ${s.id} is not answering; it may come back`, {
        reason: s.errorReason,
      })
    if (s.state === 'errored')
      throw new AppError('SANDBOX_ERRORED', `sandbox ${s.id} errored: ${s.errorMessage ?? s.errorReason}`, {
        reason: s.errorReason,
      })
    throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${s.id} is ${s.state}`, { state: s.state })
  }

  /** Ends a sandbox now; the runtime's teardown finishes in the background. */
  async kill(owner: string, id: string): Promise<void> {
    await this.own(owner, id)
    await this.end(id, 'killed')
  }

  /** Kills every sandbox of `owner` still alive (its key was revoked); ended ones stay as they are. */
  async killAll(owner: string): Promise<void> {
    for (const s of await this.store.list(owner, {})) await this.end(s.id, 'killed')
  }

  private async end(id: string, event: 'killed' | 'expired' | 'idle-killed'): Promise<void> {
    this.idle.forget(id)
    this.freezer.forget(id)
    const hibernated = (await this.store.get(id))?.hibernateSnapshot
    if (!(await this.store.transition(id, ['starting', 'running', 'hibernated', 'lost'], 'killed', event))) return
    if (hibernated) {
      await this.store.setHibernateSnapshot(id, null)
      void this.agent.deleteSnapshot(hibernated)
      return
    }
    // a fleet's leader stops it again later when this fails (its host or the store was out)
    const p = this.agent
      .stop(id)
      .catch((err) =>
        this.log[this.limits.fleet ? 'warn' : 'error']({ sandboxId: id, err: String(err) }, 'stop failed'),
      )
    this.stopping.add(p)
    void p.finally(() => this.stopping.delete(p))
  }

  async setTimeout(owner: string, id: string, ttlSeconds: number): Promise<Sandbox> {
    const s = await this.own(owner, id)
    if (s.state !== 'hibernated') this.mustRun(s)
    await this.store.setExpiry(id, new Date(Date.now() + ttlSeconds * 1000), ttlSeconds)
    return this.get(owner, id)
  }

  async reap(now = new Date()): Promise<string[]> {
    const expired = await this.store.expired(now)
    for (const s of expired) {
      if (s.onTimeout !== 'kill' && s.state === 'running')
        await this.hibernateAtTimeout(s.id, now, s.onTimeout !== 'hibernate-disk')
      else await this.end(s.id, 'expired')
    }
    await this.reapIdle(now.getTime())
    await this.freezer.pass(await this.store.running(), now.getTime())
    return expired.map((s) => s.id)
  }

  /**
   * Its TTL passed and it hibernates rather than dies (`onTimeout: 'hibernate'`): kept for the
   * longest TTL there is, until a call wakes it (with its own TTL again). If it cannot be
   * hibernated, its TTL ends it as any other.
   */
  private async hibernateAtTimeout(id: string, now: Date, keepMemory: boolean): Promise<void> {
    await this.store.setExpiry(id, new Date(now.getTime() + MAX_TTL_SECONDS * 1000))
    try {
      await this.hibernateNow(id, keepMemory)
      this.log.info({ sandboxId: id }, 'sandbox hibernated at its timeout')
    } catch (err) {
      this.log.warn({ sandboxId: id, err: String(err) }, 'hibernating at its timeout failed; it ends')
      await this.end(id, 'expired')
    }
  }

  /** Hibernates it, joining a hibernation already under way. */
  private hibernateNow(id: string, keepMemory = true): Promise<void> {
    let p = this.hibernating.get(id)
    if (!p) {
      p = this.checkpointAndStop(id, keepMemory).finally(() => this.hibernating.delete(id))
      this.hibernating.set(id, p)
    }
    return p
  }

  /**
   * Checkpoints the sandbox and stops it; the next call that needs it wakes it. Without
   * `keepMemory` only its disk is kept: its processes end and its template's start command starts
   * again first, so it wakes as if booted (E2B's filesystem-only pause).
   */
  async hibernate(owner: string, id: string, opts: { keepMemory?: boolean } = {}): Promise<Sandbox> {
    await this.running(owner, id)
    await this.hibernateNow(id, opts.keepMemory !== false)
    return this.get(owner, id)
  }

  /**
   * Image first (the sandbox keeps running), then the record, then the stop: a crash at any point
   * leaves either a running sandbox (re-attached on restart) or a hibernated one with a whole image.
   */
  private async checkpointAndStop(id: string, keepMemory = true): Promise<void> {
    const snapshotId = `hib-${randomBytes(10).toString('hex')}`
    const template = keepMemory ? undefined : (await this.store.get(id))?.template
    await this.agent.snapshot(id, snapshotId, { final: true, ...(template ? { freshStart: { template } } : {}) })
    await this.store.setHibernateSnapshot(id, snapshotId)
    if (!(await this.store.transition(id, ['running'], 'hibernated', 'hibernated'))) {
      // killed while it was being written
      await this.store.setHibernateSnapshot(id, null)
      await this.agent.deleteSnapshot(snapshotId)
      return
    }
    // its teardown goes on in the background; a wake restores under a fresh container name
    await this.agent.stop(id)
  }

  /**
   * Moves a running sandbox off its host (live migration): checkpointed and stopped there, then
   * woken where the fleet places it now (its host being cordoned, elsewhere). Same id, policy and
   * ports; a client sees a pause, calls made meanwhile wait for the wake.
   */
  async migrate(id: string): Promise<void> {
    const s = await this.store.get(id)
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
    const s = await this.own(owner, id)
    // one read of the record on the hot path (exec, files); a second only after a wake
    if (s.state === 'starting' && s.hibernateSnapshot) return this.untilWoken(owner, id)
    if (s.state !== 'hibernated') return this.mustRun(s)
    let wake = this.waking.get(id)
    if (!wake) {
      wake = this.wake(s).finally(() => this.waking.delete(id))
      this.waking.set(id, wake)
    }
    await wake
    return this.running(owner, id)
  }

  /** Waits while another replica wakes the sandbox (its record `starting` with an image). */
  private async untilWoken(owner: string, id: string): Promise<SandboxRecord> {
    for (let waited = 0; waited < WAKE_WAIT_MS; waited += 100) {
      const s = await this.own(owner, id)
      if (!(s.state === 'starting' && s.hibernateSnapshot))
        return s.state === 'hibernated' ? this.awake(owner, id) : this.mustRun(s)
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
    const claim = () => this.store.claim(s.id, 'hibernated', 'starting')
    if (!(await (this.quotas ? this.quotas.admit(s.owner, ask, claim) : claim()))) {
      await this.untilWoken(s.owner, s.id)
      return
    }
    const started = performance.now()
    try {
      await this.agent.start({
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
      await this.store.claim(s.id, 'starting', 'hibernated')
      const message = err instanceof Error ? err.message : String(err)
      this.log.warn({ sandboxId: s.id, err: message }, 'a wake failed; the sandbox stays hibernated')
      throw err instanceof AppError ? err : new AppError('INTERNAL', `the sandbox failed to wake: ${message}`)
    }
    if (!(await this.store.transition(s.id, ['starting'], 'running', 'woke'))) {
      await this.agent.stop(s.id) // killed while waking
      return
    }
    await this.store.setHibernateSnapshot(s.id, null)
    await this.agent.deleteSnapshot(snapshotId)
    // a sandbox that hibernates at its timeout lives its TTL again from its wake
    if (s.onTimeout !== 'kill') {
      const ttl = s.ttlSeconds ?? DEFAULT_TTL_SECONDS
      await this.store.setExpiry(s.id, new Date(Date.now() + ttl * 1000))
    }
    this.metrics?.wakeSeconds.observe((performance.now() - started) / 1000)
    this.log.info({ sandboxId: s.id, ms: Math.round(performance.now() - started) }, 'sandbox woke')
  }

  /** Hibernates (or kills) running, non-persistent sandboxes no request has touched for the idle timeout. */
  /** Tells the store which sandboxes had calls here since the last time (every replica, each pass). */
  async shareActivity(now = new Date()): Promise<void> {
    await this.store.touch(this.idle.seen(), now)
  }

  private async reapIdle(now: number): Promise<void> {
    const timeout = this.limits.idleTimeoutMs ?? 0
    if (timeout <= 0) return
    for (const { sandbox, idleMs } of this.idle.idle(await this.store.running(), now, timeout)) {
      const { id, owner } = sandbox
      this.log.info({ sandboxId: id, idleMs }, `idle sandbox: ${this.limits.idleAction ?? 'hibernate'}`)
      if (this.limits.idleAction === 'kill') {
        await this.end(id, 'idle-killed')
        continue
      }
      await this.store.event(id, 'idle', `${Math.round(idleMs / 1000)}s without a request`)
      const done = this.hibernate(owner, id).catch((err) =>
        this.log.warn({ sandboxId: id, err: String(err) }, 'idle hibernate failed'),
      )
      this.idle.putAway(id, done)
    }
  }

  /**
   * Changes what a sandbox may reach (fields not given stay as they are). A running sandbox has it
   * in force when this returns; a hibernated one wakes with it.
   */
  async updateNetwork(owner: string, id: string, asked: NetworkOptions): Promise<Sandbox> {
    const s = await this.own(owner, id)
    if (s.state !== 'hibernated') this.mustRun(s)
    const next = resolveNetwork(asked, s.network)
    await this.quotas?.checkScopes(owner, { network: next })
    const hibernating = this.hibernating.get(id)
    if (hibernating) await hibernating.catch(() => {})
    if ((await this.store.get(id))?.state === 'running') await this.agent.setNetwork(id, egressOf(next))
    await this.store.setNetwork(id, next)
    await this.store.event(id, 'network-updated', JSON.stringify(next))
    return this.get(owner, id)
  }

  /** Whether this replica is waking the sandbox now (recovery leaves such a one alone). */
  isWaking(id: string): boolean {
    return this.waking.has(id)
  }

  async drain(): Promise<void> {
    while (this.stopping.size > 0) await Promise.all([...this.stopping])
  }
}
