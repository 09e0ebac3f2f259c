// Launching sandboxes: each recorded, then started by the agent (from a template or a snapshot,
// or as forks of a running one); a failure leaves it `errored`, never half there.
import { randomBytes } from 'node:crypto'
import {
  type AgentApi,
  AppError,
  type CreateSandboxRequest,
  type ForkOutcome,
  type NetworkPolicy,
  type ResolvedResources,
} from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.ts'
import type { SandboxRecord, SandboxStore } from '../store/sandboxes.ts'
import { egressOf } from './network-policy.ts'
import type { QuotaGuard } from './quotas.ts'

export type LaunchInput = Required<Omit<CreateSandboxRequest, 'resources' | 'snapshot' | 'network'>> & {
  resources: ResolvedResources
  snapshot: string | undefined
  network: NetworkPolicy
}

export interface ForkInput {
  count: number
  ttlSeconds: number
  metadata?: Record<string, string>
  spread?: boolean
}

function newSandboxId(): string {
  return `sbx-${randomBytes(10).toString('hex')}`
}

export interface LauncherOptions {
  store: SandboxStore
  agent: AgentApi
  log: Logger
  maxSandboxes: number
  metrics?: Metrics
  quotas?: QuotaGuard | null
}

/** What a fork launched: every fork started, or those that did (to be killed) and the first failure. */
export type ForkLaunch = { forks: string[]; failure: null } | { forks: string[]; failure: AppError }

export class Launcher {
  private readonly store: SandboxStore
  private readonly agent: AgentApi
  private readonly log: Logger
  private readonly maxSandboxes: number
  private readonly metrics?: Metrics
  private readonly quotas: QuotaGuard | null

  constructor(o: LauncherOptions) {
    this.store = o.store
    this.agent = o.agent
    this.log = o.log
    this.maxSandboxes = o.maxSandboxes
    this.metrics = o.metrics
    this.quotas = o.quotas ?? null
  }

  /** Runs `record` once `count` sandboxes of `resources` are admitted for `owner` (its quotas). */
  private admit<T>(owner: string, count: number, r: ResolvedResources, record: () => Promise<T>): Promise<T> {
    if (!this.quotas) return record()
    const ask = { sandboxes: count, vcpus: r.vcpus * count, memoryMB: r.memoryMB * count, diskMB: r.diskMB * count }
    return this.quotas.admit(owner, ask, record)
  }

  /**
   * Records a new sandbox and has the agent start it; a failure leaves it `errored`, never half
   * there. Resolves with its id once it runs.
   */
  async launch(owner: string, req: LaunchInput, signal?: AbortSignal): Promise<string> {
    if ((await this.store.countActive()) >= this.maxSandboxes)
      throw new AppError('NO_CAPACITY', `this host runs at most ${this.maxSandboxes} sandboxes`)
    const id = newSandboxId()
    await this.admit(owner, 1, req.resources, () => this.insert(owner, id, req))
    const started = performance.now()
    try {
      await this.agent.start({ ...this.startSpec(id, req), snapshot: req.snapshot }, signal)
    } catch (err) {
      throw await this.startFailed(id, err)
    }
    await this.started(id, req.template, req.snapshot ? 'snapshot' : 'template', started)
    return id
  }

  private async insert(owner: string, id: string, req: LaunchInput): Promise<void> {
    await this.store.insert({
      id,
      owner,
      template: req.template,
      metadata: req.metadata,
      resources: req.resources,
      expiresAt: new Date(Date.now() + req.ttlSeconds * 1000),
      persistent: req.persistent,
      network: req.network,
      onTimeout: req.onTimeout,
      ttlSeconds: req.ttlSeconds,
      freeze: req.freeze,
    })
  }

  private startSpec(id: string, req: LaunchInput) {
    return { id, template: req.template, resources: req.resources, envs: req.envs, network: egressOf(req.network) }
  }

  /** The agent could not start sandbox `id`: it is errored, and this is what the caller is told. */
  private async startFailed(id: string, err: unknown): Promise<AppError> {
    const message = err instanceof Error ? err.message : String(err)
    await this.store.transition(id, ['starting'], 'errored', 'errored', {
      errorReason: 'runtime_failed',
      errorMessage: message,
    })
    this.log.error({ sandboxId: id, err: message }, 'sandbox failed to start')
    return err instanceof AppError ? err : new AppError('INTERNAL', 'the sandbox failed to start')
  }

  /** The agent started sandbox `id` (asked for at `since`): it runs, unless it was killed meanwhile. */
  private async started(id: string, template: string, from: 'snapshot' | 'template', since: number): Promise<void> {
    if (!(await this.store.transition(id, ['starting'], 'running', 'started'))) {
      // killed or expired while it was starting
      await this.agent.stop(id)
    }
    const ms = performance.now() - since
    this.metrics?.createSeconds.observe({ template, from }, ms / 1000)
    this.log.info({ sandboxId: id, template, ms: Math.round(ms) }, 'sandbox started')
  }

  /**
   * `count` new sandboxes from the live state of `id` (which keeps running). All or nothing: if
   * one fails to start, the caller kills those that started (`failure` set).
   */
  async fork(owner: string, src: SandboxRecord, req: ForkInput): Promise<ForkLaunch> {
    const { id } = src
    if ((await this.store.countActive()) + req.count > this.maxSandboxes)
      throw new AppError('NO_CAPACITY', `this host runs at most ${this.maxSandboxes} sandboxes`)
    const forkStarted = performance.now()
    const input: LaunchInput = {
      template: src.template,
      resources: src.resources,
      envs: {},
      metadata: req.metadata ?? src.metadata,
      ttlSeconds: req.ttlSeconds,
      // from the agent's checkpoint of the source
      snapshot: undefined,
      persistent: false,
      // the same policy; each fork has its own namespace and address
      network: src.network,
      onTimeout: src.onTimeout,
      freeze: src.freeze,
    }
    const ids = Array.from({ length: req.count }, newSandboxId)
    let checkpointed: number | null = null
    let outcomes: ForkOutcome[]
    try {
      // admitted as a whole before the checkpoint; recorded as its forks start
      outcomes = await this.admit(owner, req.count, src.resources, () =>
        this.agent.fork(
          id,
          ids.map((child) => this.startSpec(child, input)),
          {
            spread: req.spread,
            // the forks are recorded once the source's checkpoint is written, as they start
            onCheckpointed: async () => {
              checkpointed = performance.now()
              for (const child of ids) await this.insert(owner, child, input)
            },
          },
        ),
      )
    } catch (err) {
      if (checkpointed === null) throw err
      // the forks were recorded and the agent gave up on them: none is left starting
      const failures: AppError[] = []
      for (const child of ids) failures.push(await this.startFailed(child, err))
      for (const child of ids) await this.agent.stop(child)
      throw failures[0] ?? err
    }
    const since = checkpointed ?? forkStarted
    const forks: string[] = []
    let failure: AppError | null = null
    for (const o of outcomes) {
      if (!o.error) {
        await this.started(o.id, input.template, 'snapshot', since)
        forks.push(o.id)
      } else {
        const err = await this.startFailed(o.id, o.error)
        failure ??= err
      }
    }
    if (failure) return { forks, failure }
    for (const f of forks) await this.store.event(f, 'forked-from', id)
    await this.store.event(id, 'forked', forks.join(','))
    this.metrics?.forkSeconds.observe({ count: String(req.count) }, (performance.now() - forkStarted) / 1000)
    return { forks, failure: null }
  }
}
