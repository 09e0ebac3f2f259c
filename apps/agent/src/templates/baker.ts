// Template baking: builds a template's rootfs, boots it once, warms it up and checkpoints it into
// the snapshot every create restores (each cached by content).
import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { promisify } from 'node:util'
import { AppError, type TemplateInfo, type TemplateProgress } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { checkpointAndStop } from '../sandboxes/checkpoint-image.ts'
import type { Containers } from '../sandboxes/containers.ts'
import type { LiveSandbox } from '../sandboxes/live-sandbox.ts'
import { buildRootfs } from './build.ts'
import { type BuildLogSink, eventLine } from './build-log.ts'
import type { TemplateBuildResult as BuiltRootfs, TemplateBuildInput } from './builder.ts'
import { builtImage, imageConfigFields } from './built-image.ts'
import { loadDefinitions, type TemplateDefinition, templateHash } from './definition.ts'
import { imageDefaults, startImage } from './image-start.ts'
import type { OciOptions, RegistryAuth } from './oci.ts'
import type { PruneKeep } from './prune.ts'
import { TemplateImages } from './template-images.ts'

const BAKE_RETRY_MS = 10 * 60_000

const runDu = (args: string[], opts: { timeout: number; killSignal: 'SIGKILL' }) =>
  promisify(execFile)('du', args, opts)

/** What builds a Dockerfile into a rootfs (the agent, over its TemplateBuilder). */
export interface DockerfileBuilder {
  buildDockerfile(input: TemplateBuildInput, onLog?: BuildLogSink, signal?: AbortSignal): Promise<BuiltRootfs>
}

export interface TemplateBakerOptions {
  config: AgentConfig
  containers: Containers
  /** Part of every snapshot's key: a new guest bakes anew. */
  guestHash: string
  /** A template's snapshot is there: its warm pool may fill. */
  onReady: (def: TemplateDefinition) => void
  log: (message: string) => void
  /** Where and how images are pulled (the pull cache, the pull network, the host's image cap). */
  oci: OciOptions
  /** Builds Dockerfiles (the agent's builder): for built-in templates written as one. */
  dockerfiles: DockerfileBuilder
}

export class TemplateBaker {
  private readonly definitions: Map<string, TemplateDefinition>
  private readonly builds = new Map<string, Promise<void>>()
  /** Templates whose snapshot is known to exist (or whose bake is given up on for now). */
  private readonly snapshotChecked = new Set<string>()
  private readonly bakeFailedAt = new Map<string, number>()
  private readonly bakeErrors = new Map<string, unknown>()
  /** Image templates: their pinned digests, pulled layouts and the pulls of users' builds. */
  private readonly images: TemplateImages
  /** Templates users built (registered at run time, not from templates/): never pooled. */
  private readonly userTemplates = new Set<string>()
  /** Templates built from a Dockerfile: the rootfs dir the build made (its name is the build's key). */
  private readonly builtRootfs = new Map<string, string>()

  constructor(private readonly opts: TemplateBakerOptions) {
    this.definitions = loadDefinitions(opts.config.definitionsDir)
    this.images = new TemplateImages({ oci: opts.oci })
  }

  rootfsOf(def: TemplateDefinition): string {
    return this.builtRootfs.get(def.name) ?? join(this.opts.config.templatesDir, `${def.name}-${this.hashOf(def)}`)
  }

  private hashOf(def: TemplateDefinition): string {
    const built = this.builtRootfs.get(def.name)
    return built ? basename(built) : templateHash(def, this.images.digest(def.name))
  }

  /**
   * A template whose rootfs a Dockerfile build made: from now on it bakes and creates as the
   * built-in ones do. Registered again with a new build, it bakes anew (its snapshot is keyed by
   * the build); sandboxes running from the old rootfs keep it.
   */
  registerBuilt(def: TemplateDefinition, rootfs: string): void {
    if (this.builtRootfs.get(def.name) === rootfs && this.definitions.get(def.name) === def) return
    if (this.definitions.has(def.name) && !this.userTemplates.has(def.name))
      throw new AppError('VALIDATION_FAILED', `${def.name} is a built-in template`)
    this.definitions.set(def.name, def)
    this.userTemplates.add(def.name)
    this.builtRootfs.set(def.name, rootfs)
    this.snapshotChecked.delete(def.name)
    this.bakeFailedAt.delete(def.name)
  }

  templates(): TemplateInfo[] {
    return [...this.definitions.values()].map((d) => ({
      name: d.name,
      description: d.description,
      defaults: d.resources.defaults,
      maxima: d.resources.maxima,
      ready: (!d.image || this.images.digest(d.name) !== undefined) && existsSync(this.rootfsOf(d)),
      ...(d.exposedPorts.length > 0 ? { exposedPorts: d.exposedPorts } : {}),
    }))
  }

  /** A built-in template (from templates/), as opposed to one a user built. */
  isBuiltIn(name: string): boolean {
    return this.definitions.has(name) && !this.userTemplates.has(name)
  }

  /** Makes a user's template known (its artifacts are built on first use if missing). */
  register(def: TemplateDefinition): void {
    if (this.definitions.has(def.name) && !this.userTemplates.has(def.name))
      throw new AppError('VALIDATION_FAILED', `${def.name} is a built-in template`)
    this.definitions.set(def.name, def)
    this.userTemplates.add(def.name)
    this.images.forgetConfig(def.name)
  }

  /**
   * Builds and bakes a user's template now: unlike ensureTemplate, a bake that fails fails the
   * build (a user template's creates are restores, never cold boots).
   */
  async build(
    name: string,
    onProgress: (p: TemplateProgress) => void,
    auth: RegistryAuth = {},
    /** Most bytes its image may take (what the key's quota leaves). */
    maxBytes?: number,
  ): Promise<void> {
    this.bakeFailedAt.delete(name)
    await this.images.withAccess(name, { auth, maxBytes }, () => this.ensureTemplate(name, onProgress))
    if (!this.snapshotChecked.has(name)) {
      // a start command that never got ready is the user's to fix: its code says so
      const err = this.bakeErrors.get(name)
      const code = err instanceof AppError && err.code === 'BUILD_STEP_FAILED' ? err.code : 'INTERNAL'
      const why = err instanceof Error ? err.message : err ? String(err) : 'see the host log'
      throw new AppError(code, `baking ${name} failed: ${why}`)
    }
  }

  /** The image digest a template's reference was pinned to by its build (image templates only). */
  digestOf(name: string): string | undefined {
    return this.images.digest(name)
  }

  /** Forgets a user's template and removes its rootfs and snapshot. */
  async remove(name: string): Promise<void> {
    const def = this.definitions.get(name)
    if (!def || !this.userTemplates.has(name)) return
    await this.builds.get(name)?.catch(() => {})
    const rootfs = this.rootfsOf(def)
    const snapshot = this.snapshotOf(def)
    this.definitions.delete(name)
    this.userTemplates.delete(name)
    this.snapshotChecked.delete(name)
    this.images.forget(name)
    this.builtRootfs.delete(name)
    // a built rootfs is the build's (keyed by its last layer): other versions may share it
    const shared = [...this.builtRootfs.values()].includes(rootfs)
    for (const path of shared ? [snapshot] : [snapshot, rootfs]) rmSync(path, { recursive: true, force: true })
  }

  definition(name: string): TemplateDefinition {
    const def = this.definitions.get(name)
    if (!def) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${name}`)
    return def
  }

  /** Bytes a built template takes on disk: its rootfs and its baked snapshot (hard links once, `du -sb`). */
  async sizeOf(name: string): Promise<number> {
    const def = this.definition(name)
    const dirs = [this.rootfsOf(def), this.snapshotOf(def)].filter((d) => existsSync(d))
    if (dirs.length === 0) return 0
    const { stdout } = await runDu(['-scb', ...dirs], { timeout: 120_000, killSignal: 'SIGKILL' })
    const total = /^(\d+)\s+total$/m.exec(stdout)?.[1]
    return Number(total ?? 0)
  }

  /** The baked snapshot: template rootfs, guest daemon and default resources address it. */
  snapshotOf(def: TemplateDefinition): string {
    const key = createHash('sha256')
      .update(this.opts.guestHash)
      .update(JSON.stringify(def.resources.defaults))
      .update(def.kernel?.preload ?? '')
      .update(def.kernel?.zygote === 'baked' ? 'zygote=baked' : '')
      .update(this.opts.config.platform)
      .update('network=sandbox')
      // the guest reads its limits once, at the boot the snapshot keeps
      .update(def.limitAddressSpace ? '' : 'rlimit-as=none')
      .digest('hex')
      .slice(0, 16)
    return join(this.opts.config.templatesDir, `${def.name}-${this.hashOf(def)}.snapshot-${key}`)
  }

  /**
   * What of the templates dir the registered templates use now: each one's rootfs and current
   * snapshot, and the pulled image of each image template (whole name prefixes for one whose
   * digest this process has not resolved yet: its artifacts' names are not known).
   */
  inUse(): PruneKeep {
    const keep: PruneKeep = { names: new Set(), prefixes: [], images: new Set() }
    for (const def of this.definitions.values()) {
      // an image not resolved, or a Dockerfile not built, by this process: its names are not known
      if (
        (def.image && this.images.digest(def.name) === undefined) ||
        (def.dockerfile && !this.builtRootfs.has(def.name))
      ) {
        keep.prefixes.push(`${def.name}-`)
        continue
      }
      keep.names.add(basename(this.rootfsOf(def)))
      keep.names.add(basename(this.snapshotOf(def)))
      const digest = this.images.digest(def.name)
      if (digest) keep.images.add(digest.replace(':', '-'))
    }
    return keep
  }

  /** A snapshot that would not restore was removed: the next start bakes it again. */
  forgetSnapshot(def: TemplateDefinition): void {
    this.snapshotChecked.delete(def.name)
  }

  /** A template's rootfs, made ready first (for a build's `FROM forkbox:<name>`). */
  async readyRootfs(name: string): Promise<string> {
    const def = this.definition(name)
    await this.ensureTemplate(name)
    return this.rootfsOf(def)
  }

  /** Builds the rootfs (once, cached) and bakes the template's snapshot (once, cached). */
  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    if (this.snapshotChecked.has(name)) return Promise.resolve()
    this.definition(name)
    let build = this.builds.get(name)
    if (!build) {
      build = (async () => {
        const written = this.definition(name)
        if (written.dockerfile && !this.builtRootfs.has(name)) await this.buildWritten(written, onProgress)
        // a Dockerfile's build gives the definition its image config
        let def = this.definition(name)
        if (def.image) {
          await this.images.resolve(def, onProgress)
          const configured = await this.images.configured(def, onProgress)
          if (configured) {
            def = configured.def
            this.definitions.set(name, def)
            this.images.tookConfig(name, configured.layout)
          }
        }
        const rootfs = this.rootfsOf(def)
        // a user's build made its rootfs on another host: it is copied here (by the control plane), never remade
        if (!existsSync(rootfs) && this.userTemplates.has(name) && this.builtRootfs.has(name))
          throw new AppError(
            'TEMPLATE_UNAVAILABLE',
            `template ${name} was built on another host; its image is not here`,
            {
              template: name,
              rootfs: basename(rootfs),
            },
          )
        const layout = this.images.layout(name)
        if (!existsSync(rootfs) && layout) await this.images.unpack(def, layout, rootfs, onProgress)
        else if (!existsSync(rootfs))
          await buildRootfs(def, rootfs, {
            mirror: this.opts.config.mirror,
            debCacheDir: join(this.opts.config.templatesDir, '.debs'),
            onProgress,
          })
        if (!existsSync(this.snapshotOf(def))) {
          // creates still work without a snapshot, by cold boot; retry the bake now and then
          if (Date.now() - (this.bakeFailedAt.get(name) ?? 0) < BAKE_RETRY_MS) return
          onProgress?.({ template: name, phase: 'bake', fraction: 0, message: 'booting to snapshot' })
          try {
            await this.bake(def)
            onProgress?.({ template: name, phase: 'bake', fraction: 1, message: 'snapshot ready' })
          } catch (err) {
            this.bakeFailedAt.set(name, Date.now())
            this.bakeErrors.set(name, err)
            this.opts.log(`baking ${name} failed: ${String(err)}`)
            return
          }
        }
        this.snapshotChecked.add(name)
        this.opts.onReady(def)
      })().finally(() => this.builds.delete(name))
      this.builds.set(name, build)
    }
    return build
  }

  /**
   * A built-in template written as a Dockerfile: built (from the layer cache, after the first
   * time) by the same builder as users' templates, its image config taken into the definition.
   */
  private async buildWritten(def: TemplateDefinition, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    if (!def.dockerfile || !def.dir) throw new AppError('INTERNAL', `${def.name}: no builder for its Dockerfile`)
    const built = await this.opts.dockerfiles.buildDockerfile(
      {
        dockerfile: readFileSync(join(def.dir, def.dockerfile), 'utf8'),
        contextDir: def.dir,
        resources: def.resources.maxima,
        bounds: { stepBytes: def.resources.defaults.diskMB * 1024 * 1024 },
      },
      (e) => {
        if (e.type === 'step' || e.type === 'phase' || e.type === 'step_done')
          onProgress?.({ template: def.name, phase: 'build', message: eventLine(e).message })
      },
    )
    this.definitions.set(def.name, { ...def, ...imageConfigFields(builtImage(built), def.user) })
    this.builtRootfs.set(def.name, built.rootfs)
  }

  /** Boots the template once, then checkpoints it into the snapshot store (write, then rename). */
  private async bake(def: TemplateDefinition): Promise<void> {
    const id = `bake-${def.name}-${randomBytes(6).toString('hex')}`
    const sbx = await this.opts.containers.boot({
      id,
      resources: def.resources.defaults,
      envs: def.env,
      rootfs: this.rootfsOf(def),
      kernel: def.kernel,
      image: null,
      imageDefaults: imageDefaults(def),
      limitAddressSpace: def.limitAddressSpace,
    })
    try {
      await this.warmUp(def, sbx)
      await startImage(def, sbx)
      await checkpointAndStop(this.opts.containers.runsc, sbx, this.snapshotOf(def))
    } catch (err) {
      await this.opts.containers.stop(id)
      throw err
    }
  }

  /**
   * Runs what a first request runs, so its code paths, page tables and file caches are warm:
   * before a bake (captured in the snapshot) and after a pool restore (a restored sandbox's first
   * exec took 50-70 ms in the guest against ~25 ms for the next).
   */
  async warmUp(def: TemplateDefinition, sbx: LiveSandbox): Promise<void> {
    const { guest } = sbx
    const exec = { timeoutMs: 10_000, maxOutputBytes: 1024 }
    if (def.kernel) {
      // the template's kernel, started with its preload: the first cell of a sandbox skips both
      await sbx.conn.call({ op: 'context_ready', language: 'python' })
      const cell = { language: 'python', timeoutMs: 30_000, maxOutputBytes: 1024, silent: true }
      await guest.runCode({ ...cell, code: 'None' })
    }
    await guest.exec({ argv: ['true'], ...exec })
    await guest.exec({ cmd: 'true', ...exec })
    await guest.writeFile(
      '/tmp/.forkbox-warm',
      (async function* () {
        yield new Uint8Array(1)
      })(),
    )
    await guest.fileOp({ op: 'remove', path: '/tmp/.forkbox-warm', recursive: false })
  }
}
