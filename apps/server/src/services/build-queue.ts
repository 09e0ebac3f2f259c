// Builds queued onto the agent: a few at once, each held by this replica under a lease (replicas
// sharing a store fail the builds of one that went away), run with the key's logins and bounds,
// kept or failed with a reason, and logged line by line.

import { rmSync } from 'node:fs'
import { type AgentApi, AppError, isErrorCode, uploadOf } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { RegistryCredentialStore } from '../store/registry-credentials.ts'
import type { TemplateStore } from '../store/templates.ts'
import type { BuildLogs } from './build-logs.ts'

/** A replica's hold on a build it queues or runs: renewed every third of it. */
const BUILD_LEASE_MS = 60_000

/** What bounds the builds a queue runs (the template service's limits carry these). */
export interface BuildQueueLimits {
  /** Builds running at once; more wait their turn. */
  maxConcurrentBuilds: number
  /** Refuses a build once made when its bytes would pass its key's quota of template bytes. */
  admitBuilt?: (owner: string, sizeBytes: number) => Promise<void>
  /** The key's templateBytes quota and what of it its templates leave now (null: no quota). */
  templateBytesRoom?: (owner: string) => Promise<{ limitBytes: number; leftBytes: number } | null>
}

export interface BuildQueueOptions {
  store: TemplateStore
  agent: AgentApi
  log: Logger
  limits: BuildQueueLimits
  /** Each key's registry logins, passed to its builds' pulls. */
  registries?: RegistryCredentialStore
  logs: BuildLogs
}

export class BuildQueue {
  private readonly queue: string[] = []
  private readonly running = new Map<string, AbortController>()
  private readonly leaseTimer: NodeJS.Timeout
  private readonly logs: BuildLogs

  constructor(private readonly o: BuildQueueOptions) {
    this.logs = o.logs
    this.leaseTimer = setInterval(() => {
      if (this.queue.length > 0 || this.running.size > 0) this.renewLeases()
    }, BUILD_LEASE_MS / 3)
    this.leaseTimer.unref()
  }

  /** Aborts the build if this replica runs it (its record is failed by whoever cancels it). */
  cancel(id: string): void {
    this.running.get(id)?.abort()
  }

  enqueue(id: string): void {
    this.queue.push(id)
    this.renewLeases()
    this.pump()
  }

  /** Marks the builds this replica queues or runs as its own a while longer (see `failLapsed`). */
  private renewLeases(): void {
    const ids = [...this.queue, ...this.running.keys()]
    this.o.store
      .renewLeases(ids, new Date(Date.now() + BUILD_LEASE_MS))
      .catch((err: unknown) => this.o.log.debug({ err: String(err) }, 'renewing build leases failed'))
  }

  /**
   * Replicas sharing a store: builds queued or running on one that went away (no lease renewed
   * for a minute) are failed, not left `building` for ever. The leader runs this.
   */
  async failLapsed(): Promise<void> {
    for (const id of await this.o.store.lapsed(new Date())) {
      if (this.queue.includes(id) || this.running.has(id)) continue
      if (
        await this.o.store.transition(id, ['queued', 'building'], 'failed', {
          error: { code: 'INTERNAL', message: 'the control plane replica running the build went away' },
        })
      )
        this.o.log.warn({ buildId: id }, 'build failed: its replica went away')
    }
  }

  private pump(): void {
    while (this.running.size < this.o.limits.maxConcurrentBuilds && this.queue.length > 0) {
      const id = this.queue.shift() as string
      const ctl = new AbortController()
      this.running.set(id, ctl)
      void this.run(id, ctl.signal).finally(async () => {
        await this.logs.end(id)
        this.running.delete(id)
        this.pump()
      })
    }
  }

  private async run(id: string, signal: AbortSignal): Promise<void> {
    const b = await this.o.store.getBuild(id)
    if (!b || !(await this.o.store.transition(id, ['queued'], 'building'))) return
    await this.logs.begin(id)
    const started = performance.now()
    this.logs.append(id, { stream: 'system', message: `build ${id}: version ${b.version} of ${b.template}` })
    const owner = (await this.o.store.get(b.templateId))?.owner
    // the quota bounds the build while it writes (the agent's scratch disks), not only once built
    const room = owner ? await this.o.limits.templateBytesRoom?.(owner) : null
    try {
      const auth = owner && this.o.registries ? await this.o.registries.auth(owner) : {}
      const limits = owner ? { owner, ...(room ? { maxBytes: room.leftBytes } : {}) } : undefined
      const { pinned, sizeBytes } = await this.o.agent.buildTemplate(
        { ...b.spec, ...(limits ? { limits } : {}) },
        (line) => this.logs.append(id, line),
        signal,
        auth,
      )
      if (owner && sizeBytes !== undefined)
        await this.o.limits.admitBuilt?.(owner, sizeBytes).catch(async (err: unknown) => {
          // past the key's quota once built: it is not kept
          await this.o.agent.removeTemplate(b.spec.name)
          throw err
        })
      const seconds = ((performance.now() - started) / 1000).toFixed(1)
      this.logs.append(id, { stream: 'system', message: `ready in ${seconds} s` })
      await this.logs.flush(id)
      if (!(await this.o.store.transition(id, ['building'], 'ready', { spec: pinned, sizeBytes }))) {
        await this.o.agent.removeTemplate(b.spec.name) // deleted meanwhile
        await this.o.store.markRemoved(id)
      }
    } catch (err) {
      const code = err instanceof AppError ? err.code : 'INTERNAL'
      const message = err instanceof Error ? err.message : String(err)
      this.logs.append(id, { stream: 'system', message: `failed: ${message}` })
      await this.logs.flush(id)
      await this.o.store.transition(id, ['building'], 'failed', {
        error: { code: isErrorCode(code) ? code : 'INTERNAL', message },
      })
      if (!(err instanceof AppError)) this.o.log.error({ err, buildId: id }, 'template build failed')
    } finally {
      const upload = uploadOf(b.spec)
      if (upload) rmSync(upload, { force: true })
      // the layer cache stays under its cap, and the key's layers (a failed build's steps too) under
      // its quota; a failed eviction is no failed build
      const own = owner && room ? { owner: { keyId: owner, maxBytes: room.limitBytes } } : {}
      this.o.agent
        .pruneTemplates({ layersOnly: true, ...own })
        .catch((err: unknown) => this.o.log.warn({ err }, 'pruning the template store failed'))
    }
  }

  /** Stops accepting builds and waits for those running to end (they are aborted). */
  async drain(): Promise<void> {
    clearInterval(this.leaseTimer)
    this.queue.length = 0
    const done = [...this.running.keys()].map((id) => this.logs.ended(id))
    for (const ctl of this.running.values()) ctl.abort()
    await Promise.all(done)
  }
}
