// How a sandbox starts: from a user snapshot; else a pooled sandbox, a restore of its template's
// snapshot, or a cold boot that runs the template's start command. Also a fresh start of that
// command in a running sandbox (what a filesystem-only pause keeps).
import { existsSync, rmSync } from 'node:fs'
import { GuestEnded, type StartSandboxSpec } from '@forkbox/protocol'
import type { Checkpoints } from './sandboxes/checkpoints.ts'
import type { Containers } from './sandboxes/containers.ts'
import type { WarmPool } from './sandboxes/warm-pool.ts'
import type { TemplateBaker } from './templates/baker.ts'
import type { TemplateDefinition } from './templates/definition.ts'
import { imageDefaults as imageDefaultsOf, startImage } from './templates/image-start.ts'

const REFILL_DELAY_MS = 250

function sameResources(a: StartSandboxSpec['resources'], b: StartSandboxSpec['resources']): boolean {
  return a.vcpus === b.vcpus && a.memoryMB === b.memoryMB && a.diskMB === b.diskMB && a.pids === b.pids
}

export interface SandboxStarterOptions {
  baker: TemplateBaker
  pool: WarmPool
  checkpoints: Checkpoints
  containers: Containers
  log: (message: string) => void
}

export class SandboxStarter {
  constructor(private readonly opts: SandboxStarterOptions) {}

  /** From a user snapshot; else a pooled sandbox, a restore of the template's snapshot, or a cold boot. */
  async start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void> {
    const { snapshot } = spec
    if (snapshot) return this.opts.checkpoints.restore({ ...spec, snapshot }, signal)
    const def = this.opts.baker.definition(spec.template)
    await this.opts.baker.ensureTemplate(spec.template)
    const image = this.opts.baker.snapshotOf(def)
    const standard = sameResources(spec.resources, def.resources.defaults)
    // only built-in templates keep warm sandboxes: a user's template is a restore
    if (standard && this.opts.baker.isBuiltIn(def.name)) {
      const claimed = await this.opts.pool.claim(def, spec)
      // a restore is CPU-bound: let the claimed sandbox's first requests go before refilling
      setTimeout(() => this.opts.pool.refill(def), REFILL_DELAY_MS).unref()
      if (claimed) return
    }
    if (standard && existsSync(image)) {
      try {
        await this.boot(def, spec, image, signal)
        return
      } catch (err) {
        if (signal?.aborted) throw err
        // A snapshot that will not restore is rebuilt on the next start; this one cold-boots.
        this.opts.log(`restore of ${image} failed, cold-booting instead: ${String(err)}`)
        rmSync(image, { recursive: true, force: true })
        this.opts.baker.forgetSnapshot(def)
      }
    }
    await this.boot(def, spec, null, signal)
  }

  private async boot(
    def: TemplateDefinition,
    spec: StartSandboxSpec,
    image: string | null,
    signal?: AbortSignal,
  ): Promise<void> {
    const rootfs = this.opts.baker.rootfsOf(def)
    const envs = { ...def.env, ...spec.envs }
    const imageDefaults = imageDefaultsOf(def)
    const sbx = await this.opts.containers.boot(
      {
        ...spec,
        envs,
        rootfs,
        kernel: def.kernel,
        image,
        imageDefaults,
        limitAddressSpace: def.limitAddressSpace,
      },
      signal,
    )
    // restored, it runs already (the bake started it); cold-booted, it starts now
    if (!image)
      await startImage(def, sbx).catch(async (err) => {
        await this.opts.containers.stop(spec.id)
        throw err
      })
  }

  /**
   * Ends every process in the sandbox and starts its template's start command again (and waits
   * for it to be ready), as a boot would: what a filesystem-only pause keeps. A template gone
   * since has no start command to run.
   */
  async startFresh(id: string, template: string): Promise<void> {
    const sbx = this.opts.containers.live(id)
    const { ended } = await sbx.conn.call({ op: 'end_processes' }, GuestEnded)
    this.opts.log(`${id}: ${ended} processes ended for a fresh start`)
    let def: TemplateDefinition
    try {
      def = this.opts.baker.definition(template)
    } catch {
      return
    }
    await startImage(def, sbx)
  }
}
