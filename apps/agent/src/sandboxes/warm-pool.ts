// The warm pool: per template, sandboxes restored from its snapshot and warmed up ahead of
// creates; a create with the template's default resources claims one instead of restoring.
// Sized to demand: a pool grows toward the most creates its template saw within 10 s over the
// last `poolHistorySeconds` (between `poolSize` and `poolMax`, within `poolMemoryMB` for all
// pools), and shrinks back once that burst is forgotten.
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import type { StartSandboxSpec } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { CLOSED } from '../network/manager.ts'
import { limitCpu, readUsage } from '../runtime/cgroups.ts'
import type { TemplateBaker } from '../templates/baker.ts'
import type { TemplateDefinition } from '../templates/definition.ts'
import type { Containers } from './containers.ts'
import type { LiveSandbox } from './live-sandbox.ts'
import { Demand, fitsBudget, poolTarget } from './pool-demand.ts'

/** A burst: the most creates within this long is what a pool grows toward. */
const DEMAND_WINDOW_MS = 10_000
/** What a pooled sandbox is assumed to hold before one is measured (an idle code-interpreter: ~120 MiB). */
const POOLED_BYTES_GUESS = 128 * 1024 * 1024

export class WarmPool {
  private readonly pools = new Map<string, LiveSandbox[]>()
  private readonly filling = new Map<string, Promise<void>>()
  /** Creates per template, for the size its pool aims at. */
  private readonly demand = new Map<string, Demand>()
  private readonly defs = new Map<string, TemplateDefinition>()
  private closing = false

  constructor(
    private readonly config: AgentConfig,
    private readonly containers: Containers,
    private readonly baker: TemplateBaker,
    private readonly log: (message: string) => void,
  ) {}

  /** Takes a pooled sandbox for `spec`: configured with its envs, it becomes `spec.id`. */
  async claim(def: TemplateDefinition, spec: StartSandboxSpec): Promise<boolean> {
    const demand = this.demand.get(def.name) ?? new Demand(DEMAND_WINDOW_MS, this.config.poolHistorySeconds * 1000)
    this.demand.set(def.name, demand)
    demand.record()
    const pool = this.pools.get(def.name) ?? []
    for (let sbx = pool.shift(); sbx; sbx = pool.shift()) {
      if (sbx.stopping || sbx.conn.failed) continue
      this.containers.rename(sbx, spec.id)
      this.containers.thaw(sbx)
      try {
        // the sandbox-level env is replaced: the template's (its image's ENV) under the create's
        await sbx.conn.configureRestored({ env: { ...def.env, ...spec.envs }, hostname: spec.id })
        await this.containers.setPolicy(sbx, spec.network ?? CLOSED)
        return true
      } catch {
        await this.containers.stop(spec.id)
      }
    }
    return false
  }

  /** The size the template's pool aims at now. */
  target(name: string): number {
    const peak = this.demand.get(name)?.peak() ?? 0
    return poolTarget(peak, this.config.poolSize, Math.max(this.config.poolSize, this.config.poolMax))
  }

  /** Whether the pools may hold one more sandbox of theirs, by the memory the pooled ones hold. */
  private fits(belowFloor: boolean): boolean {
    const pooled = [...this.pools.values()].flat()
    const measuredBytes = pooled.map((sbx) => readUsage(sbx.cgroup)?.memoryBytes ?? 0).filter((b) => b > 0)
    return fitsBudget({
      pooled: pooled.length,
      measuredBytes,
      budgetBytes: this.config.poolMemoryMB * 1024 * 1024,
      fallbackBytes: POOLED_BYTES_GUESS,
      belowFloor,
    })
  }

  /** Tops the template's pool up to its target, one restore at a time, in the background. */
  refill(def: TemplateDefinition): void {
    if (this.config.poolSize <= 0 || this.filling.has(def.name) || this.closing) return
    const snapshot = this.baker.snapshotOf(def)
    if (!existsSync(snapshot)) return
    this.defs.set(def.name, def)
    const pool = this.pools.get(def.name) ?? []
    this.pools.set(def.name, pool)
    const fill = (async () => {
      while (
        !this.closing &&
        pool.length < this.target(def.name) &&
        this.fits(pool.length < this.config.poolSize) &&
        existsSync(snapshot)
      ) {
        const id = `pool-${def.name}-${randomBytes(6).toString('hex')}`
        try {
          const sbx = await this.containers.boot({
            id,
            resources: def.resources.defaults,
            envs: {},
            rootfs: this.baker.rootfsOf(def),
            kernel: def.kernel,
            image: snapshot,
            limitCpu: false,
          })
          await this.baker.warmUp(def, sbx)
          limitCpu(sbx.cgroup, def.resources.defaults.vcpus)
          if (this.closing) await this.containers.stop(id)
          else pool.push(sbx)
        } catch (err) {
          this.log(`warm pool for ${def.name}: restore failed: ${String(err)}`)
          return
        }
      }
    })().finally(() => this.filling.delete(def.name))
    this.filling.set(def.name, fill)
  }

  /**
   * Now and then: freezes the pooled sandboxes that are quiet (they wait, and would burn gVisor's
   * idle CPU), grows a pool whose template's demand rose, and stops what a pool holds past its
   * target once the burst that grew it is forgotten (one per template per call).
   */
  tend(maxCpuPercent: number): void {
    for (const [name, pool] of this.pools) {
      const target = this.target(name)
      if (pool.length > target && !this.filling.has(name)) {
        const extra = pool.pop() as LiveSandbox
        this.containers.stop(extra.id).catch((err) => this.log(`warm pool for ${name}: stopping ${extra.id}: ${err}`))
      } else if (pool.length < target) {
        const def = this.defs.get(name)
        if (def) this.refill(def)
      }
      for (const sbx of pool) if (!sbx.stopping) this.containers.freezeIfQuiet(sbx, maxCpuPercent)
    }
  }

  /** Pooled (unclaimed) sandboxes per template. */
  sizes(): Record<string, number> {
    return Object.fromEntries([...this.pools].map(([name, pool]) => [name, pool.length]))
  }

  /** Stops filling; the pooled sandboxes are left to the containers' close. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([...this.filling.values()])
    this.pools.clear()
  }
}
