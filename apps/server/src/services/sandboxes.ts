// Sandbox lifecycle: records and ownership, create, fork, snapshots, kill and the reaper, network
// changes; the work in the agent. Hibernation and waking (hibernation.ts), the call path of a
// running sandbox (sandbox-calls.ts), recovery (sandbox-recovery.ts) and events are rooms apart.
import { randomBytes } from 'node:crypto'
import {
  type AgentApi,
  AppError,
  type CreateSandboxRequest,
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
import { Hibernation } from './hibernation.ts'
import { IdleTracker } from './idle.ts'
import { type ForkInput, Launcher } from './launch.ts'
import { egressOf, resolveNetwork } from './network-policy.ts'
import type { QuotaGuard } from './quotas.ts'
import { mustRun, ownRecord } from './sandbox-records.ts'
import { agentTemplates, type TemplateResolver } from './template-resolver.ts'

type CreateInput = Required<Omit<CreateSandboxRequest, 'resources' | 'snapshot' | 'network'>> & {
  resources: Resources
  snapshot?: string
  network: NetworkOptions
}

export interface SandboxLimits {
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
}

export interface SandboxServiceOptions {
  store: SandboxStore
  agent: AgentApi
  log: Logger
  limits: SandboxLimits
  snapshots: SnapshotStore
  auth: Authenticator
  metrics?: Metrics
  /** What a create's template is, and how a template is shown (default: the agent's built-ins, by name). */
  templates?: TemplateResolver
}

export class SandboxService {
  private readonly stopping = new Set<Promise<void>>()
  private readonly idle: IdleTracker
  private readonly freezer: Freezer
  /** Hibernating, waking and migrating sandboxes (hibernation.ts). */
  readonly hibernation: Hibernation
  private readonly launcher: Launcher
  private readonly quotas: QuotaGuard | null

  private readonly store: SandboxStore
  private readonly agent: AgentApi
  private readonly log: Logger
  private readonly limits: SandboxLimits
  private readonly snapshots: SnapshotStore
  private readonly auth: Authenticator
  readonly metrics?: Metrics
  private readonly templates: TemplateResolver

  constructor(o: SandboxServiceOptions) {
    const { store, agent, log, limits, metrics } = o
    this.store = store
    this.agent = agent
    this.log = log
    this.limits = limits
    this.snapshots = o.snapshots
    this.auth = o.auth
    this.metrics = metrics
    this.templates = o.templates ?? agentTemplates(agent)
    this.idle = new IdleTracker(limits.fleet === true)
    this.freezer = new Freezer({ agent, store, idle: this.idle, log, afterMs: limits.freezeAfterMs ?? 0 })
    this.quotas = limits.quotas ?? null
    this.hibernation = new Hibernation({ store, agent, log, quotas: this.quotas, metrics })
    this.launcher = new Launcher({ store, agent, log, maxSandboxes: limits.maxSandboxes, metrics, quotas: this.quotas })
    agent.onExit((id, reason, message) => {
      if (!reason) return
      const extra = { errorReason: reason, errorMessage: message ?? undefined }
      this.store
        .transition(id, ['starting', 'running'], 'errored', 'errored', extra)
        .then((changed) => changed && this.log.warn({ sandboxId: id, reason }, 'sandbox errored'))
        .catch((err: unknown) => this.log.error({ sandboxId: id, err }, 'recording an exit failed'))
    })
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
      const info = await this.templates.resolve(owner, req.template)
      const template = info.name
      const resources = this.resolveResources(info, req.resources)
      // the image's EXPOSE, unless the create names its ports
      if (req.network.ports === undefined && info.exposedPorts) network.ports = [...info.exposedPorts]
      await this.quotas?.checkScopes(owner, { network })
      const id = await this.launcher.launch(
        owner,
        { ...req, template, resources, snapshot: undefined, network },
        signal,
      )
      return this.get(owner, id)
    }
    const snap = await this.ownSnapshot(owner, req.snapshot)
    await this.quotas?.checkScopes(owner, { template: await this.templates.label(snap.template), network })
    if (Object.keys(req.resources).length > 0)
      throw new AppError('VALIDATION_FAILED', 'a sandbox started from a snapshot has the resources of the snapshot')
    const started = await this.launcher.launch(
      owner,
      { ...req, template: snap.template, resources: snap.resources, snapshot: snap.id, network },
      signal,
    )
    return this.get(owner, started)
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
    const src = await this.hibernation.awake(owner, id)
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
    const src = await this.hibernation.awake(owner, id)
    await this.quotas?.checkScopes(owner, { template: await this.templates.label(src.template), network: src.network })
    const { forks, failure } = await this.busyWith(id, () => this.launcher.fork(owner, src, req))
    if (failure) {
      for (const f of forks) await this.end(f, 'killed')
      throw failure
    }
    return Promise.all(forks.map((f) => this.get(owner, f)))
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
    const s = await ownRecord(this.store, owner, id)
    if (s.state !== 'hibernated') mustRun(s)
  }

  /** The API's view of a sandbox, with its exposed-port token (derived, never stored). */
  private async public(s: SandboxRecord): Promise<Sandbox> {
    return {
      ...toPublic(s),
      template: await this.templates.label(s.template),
      accessToken: this.auth.token('port', s.id),
      domain: this.limits.sandboxDomain,
    }
  }

  /** The key that owns sandbox `id`, or null when there is no such sandbox. */
  async ownerOf(id: string): Promise<string | null> {
    return (await this.store.get(id))?.owner ?? null
  }

  async get(owner: string, id: string): Promise<Sandbox> {
    return this.public(await ownRecord(this.store, owner, id))
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
    return mustRun(await ownRecord(this.store, owner, id))
  }

  /** Ends a sandbox now; the runtime's teardown finishes in the background. */
  async kill(owner: string, id: string): Promise<void> {
    await ownRecord(this.store, owner, id)
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
    const s = await ownRecord(this.store, owner, id)
    if (s.state !== 'hibernated') mustRun(s)
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
      await this.hibernation.hibernateNow(id, keepMemory)
      this.log.info({ sandboxId: id }, 'sandbox hibernated at its timeout')
    } catch (err) {
      this.log.warn({ sandboxId: id, err: String(err) }, 'hibernating at its timeout failed; it ends')
      await this.end(id, 'expired')
    }
  }

  /**
   * Checkpoints the sandbox and stops it; the next call that needs it wakes it. Without
   * `keepMemory` only its disk is kept: its processes end and its template's start command starts
   * again first, so it wakes as if booted (E2B's filesystem-only pause).
   */
  async hibernate(owner: string, id: string, opts: { keepMemory?: boolean } = {}): Promise<Sandbox> {
    await this.running(owner, id)
    await this.hibernation.hibernateNow(id, opts.keepMemory !== false)
    return this.get(owner, id)
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
    const s = await ownRecord(this.store, owner, id)
    if (s.state !== 'hibernated') mustRun(s)
    const next = resolveNetwork(asked, s.network)
    await this.quotas?.checkScopes(owner, { network: next })
    await this.hibernation.settled(id)
    if ((await this.store.get(id))?.state === 'running') await this.agent.setNetwork(id, egressOf(next))
    await this.store.setNetwork(id, next)
    await this.store.event(id, 'network-updated', JSON.stringify(next))
    return this.get(owner, id)
  }

  async drain(): Promise<void> {
    while (this.stopping.size > 0) await Promise.all([...this.stopping])
  }
}
