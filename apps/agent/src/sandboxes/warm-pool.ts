// The warm pool: per template, sandboxes restored from its snapshot and warmed up ahead of
// creates; a create with the template's default resources claims one instead of restoring.
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import type { StartSandboxSpec } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { CLOSED } from '../network/manager.ts'
import { limitCpu } from '../runtime/cgroups.ts'
import type { TemplateBaker } from '../templates/baker.ts'
import type { TemplateDefinition } from '../templates/definition.ts'
import type { Containers } from './containers.ts'
import type { LiveSandbox } from './live-sandbox.ts'

export class WarmPool {
  private readonly pools = new Map<string, LiveSandbox[]>()
  private readonly filling = new Map<string, Promise<void>>()
  private closing = false

  constructor(
    private readonly config: AgentConfig,
    private readonly containers: Containers,
    private readonly baker: TemplateBaker,
    private readonly log: (message: string) => void,
  ) {}

  /** Takes a pooled sandbox for `spec`: configured with its envs, it becomes `spec.id`. */
  async claim(def: TemplateDefinition, spec: StartSandboxSpec): Promise<boolean> {
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

  /** Tops the template's pool up to `poolSize`, one restore at a time, in the background. */
  refill(def: TemplateDefinition): void {
    if (this.config.poolSize <= 0 || this.filling.has(def.name) || this.closing) return
    const snapshot = this.baker.snapshotOf(def)
    if (!existsSync(snapshot)) return
    const pool = this.pools.get(def.name) ?? []
    this.pools.set(def.name, pool)
    const fill = (async () => {
      while (!this.closing && pool.length < this.config.poolSize && existsSync(snapshot)) {
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

  /** Freezes the pooled sandboxes that are quiet (they wait, and would burn gVisor's idle CPU). */
  freezeIdle(maxCpuPercent: number): void {
    for (const pool of this.pools.values())
      for (const sbx of pool) if (!sbx.stopping) this.containers.freezeIfQuiet(sbx, maxCpuPercent)
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
