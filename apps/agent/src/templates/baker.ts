// Template baking: builds a template's rootfs, boots it once, warms it up and checkpoints it into
// the snapshot every create restores (each cached by content).
import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { promisify } from 'node:util'
import { AppError, type ProcessExit, type TemplateInfo, type TemplateProgress } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { RUNTIME_PYTHON } from '../guest/runtime.ts'
import type { ImageDefaults } from '../runtime/oci-spec.ts'
import { checkpointAndStop } from '../sandboxes/checkpoint-image.ts'
import type { Containers } from '../sandboxes/containers.ts'
import type { LiveSandbox } from '../sandboxes/live-sandbox.ts'
import { buildRootfs } from './build.ts'
import { quotaBound, tighter } from './build-disk.ts'
import { type BuildLogSink, eventLine } from './build-log.ts'
import type { TemplateBuildResult as BuiltRootfs, TemplateBuildInput } from './builder.ts'
import { builtImage, imageConfigFields } from './built-image.ts'
import { loadDefinitions, type TemplateDefinition, templateHash } from './definition.ts'
import {
  type OciOptions,
  pullImage,
  type RegistryAuth,
  readImageConfig,
  resolveImageDigest,
  unpackImage,
  userNameOf,
} from './oci.ts'
import type { PruneKeep } from './prune.ts'

const BAKE_RETRY_MS = 10 * 60_000

const READY_TIMEOUT_MS = 120_000

/** What a user's image sets for its sandboxes (none for the built-in templates). */
export function imageDefaults(def: TemplateDefinition): ImageDefaults | undefined {
  return def.imageDirs ? { user: def.user, workdir: def.workdir } : undefined
}

/** How often a start command that exits before it is ready is started again, in all. */
const START_ATTEMPTS = 3
const START_RETRY_MS = 500
/** How much of a start command's last output an error quotes. */
const START_OUTPUT_TAIL = 2000

/**
 * Starts the image's start command in the background and waits for it to be ready: its ready
 * command exits 0, or else every exposed port accepts a connection (checked on the guest's own
 * Python, which any image has). A bake captures it running; a cold boot runs it the same way.
 *
 * A start command that fails before it is ready (exits non-zero, or is killed) is started again
 * (a few times, as a supervisor would): a server finding a stale pid file of its last life whose
 * pid another process holds now — as after any reboot — exits once and starts the next time.
 * When it keeps failing, the error quotes what it printed instead of waiting out the ready
 * timeout. One that exits 0 has handed over to a daemon (`service x start`): probing goes on.
 */
export async function startImage(def: TemplateDefinition, sbx: LiveSandbox): Promise<void> {
  if (!def.startCmd) return
  const { guest } = sbx
  const probe =
    def.readyCmd ??
    (def.exposedPorts.length > 0
      ? [
          RUNTIME_PYTHON,
          '-S',
          '-c',
          'import socket, sys\nfor p in sys.argv[1:]: socket.create_connection(("127.0.0.1", int(p)), 1).close()',
          ...def.exposedPorts.map(String),
        ]
      : null)
  const deadline = Date.now() + READY_TIMEOUT_MS
  let last = ''
  for (let attempt = 1; ; attempt++) {
    // no timeout: it runs for the sandbox's life
    const { pid } = await guest.startProcess({
      argv: def.startCmd,
      cwd: def.workdir,
      user: def.user,
      timeoutMs: 0,
      maxOutputBytes: 0,
    })
    if (!probe) return
    // its output and its end, while it starts (detached once it is ready)
    let output = ''
    const keep = (chunk: Uint8Array) => {
      output = (output + Buffer.from(chunk).toString('utf8')).slice(-START_OUTPUT_TAIL)
    }
    const attached = new AbortController()
    let exited: ProcessExit | null = null
    const ended = guest
      .attachProcess(pid, { offset: 0 }, { onStdout: keep, onStderr: keep }, attached.signal)
      .then((exit) => {
        exited = exit
      })
      .catch(() => {})
    const failed = (): ProcessExit | null => {
      const e = exited as ProcessExit | null
      return e && (e.exitCode !== 0 || e.signal) ? e : null
    }
    try {
      while (Date.now() < deadline && !failed()) {
        const r = await guest.exec({
          argv: probe,
          user: def.user,
          cwd: def.workdir,
          timeoutMs: 10_000,
          maxOutputBytes: 4096,
        })
        if (r.exitCode === 0 && !failed()) return
        last = `${Buffer.from(r.stdout).toString('utf8')}${Buffer.from(r.stderr).toString('utf8')}`.trim().slice(-500)
        const pause = new Promise((resolve) => setTimeout(resolve, 250))
        await (exited ? pause : Promise.race([ended, pause]))
      }
    } finally {
      attached.abort()
      await ended
    }
    const gone = failed()
    if (!gone) break
    const how = gone.signal ? `was killed by ${gone.signal}` : `exited with code ${gone.exitCode}`
    last = `it ${how} before it was ready${output.trim() ? `: ${output.trim()}` : ''}`
    if (attempt >= START_ATTEMPTS || Date.now() >= deadline)
      throw new AppError(
        'BUILD_STEP_FAILED',
        `the start command ${JSON.stringify(def.startCmd)} did not start (${attempt} tries): ${last}`,
      )
    await new Promise((resolve) => setTimeout(resolve, START_RETRY_MS))
  }
  throw new AppError(
    'BUILD_STEP_FAILED',
    `the start command ${JSON.stringify(def.startCmd)} was not ready within ${READY_TIMEOUT_MS / 1000} s${last ? `: ${last}` : ''}`,
  )
}

const runDu = (args: string[], opts: { timeout: number; killSignal: 'SIGKILL' }) =>
  promisify(execFile)('du', args, opts)

/** What builds a Dockerfile into a rootfs (the agent, over its TemplateBuilder). */
export interface DockerfileBuilder {
  buildDockerfile(input: TemplateBuildInput, onLog?: BuildLogSink, signal?: AbortSignal): Promise<BuiltRootfs>
}

export class TemplateBaker {
  private readonly definitions: Map<string, TemplateDefinition>
  private readonly builds = new Map<string, Promise<void>>()
  /** Templates whose snapshot is known to exist (or whose bake is given up on for now). */
  private readonly snapshotChecked = new Set<string>()
  private readonly bakeFailedAt = new Map<string, number>()
  private readonly bakeErrors = new Map<string, unknown>()
  /** Image templates: the manifest digest their reference resolved to when first ensured. */
  private readonly imageDigests = new Map<string, string>()
  /** Image templates whose definition took its image's config (env, workdir, user): their pulled layout. */
  private readonly imageLayouts = new Map<string, string>()
  /** Templates users built (registered at run time, not from templates/): never pooled. */
  private readonly userTemplates = new Set<string>()
  /** While a user's build runs: its registry credentials (access must be shown) and its byte bound. */
  private readonly buildAccess = new Map<string, { auth: RegistryAuth; maxBytes?: number }>()
  /** Templates built from a Dockerfile: the rootfs dir the build made (its name is the build's key). */
  private readonly builtRootfs = new Map<string, string>()

  constructor(
    private readonly config: AgentConfig,
    private readonly containers: Containers,
    /** Part of every snapshot's key: a new guest bakes anew. */
    private readonly guestHash: string,
    /** A template's snapshot is there: its warm pool may fill. */
    private readonly onReady: (def: TemplateDefinition) => void,
    private readonly log: (message: string) => void,
    /** Where and how images are pulled (the pull cache, the pull network, the host's image cap). */
    private readonly oci: OciOptions,
    /** Builds Dockerfiles (the agent's builder): for built-in templates written as one. */
    private readonly dockerfiles: DockerfileBuilder,
  ) {
    this.definitions = loadDefinitions(config.definitionsDir)
  }

  rootfsOf(def: TemplateDefinition): string {
    return this.builtRootfs.get(def.name) ?? join(this.config.templatesDir, `${def.name}-${this.hashOf(def)}`)
  }

  private hashOf(def: TemplateDefinition): string {
    const built = this.builtRootfs.get(def.name)
    return built ? basename(built) : templateHash(def, this.imageDigests.get(def.name))
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
      ready: (!d.image || this.imageDigests.has(d.name)) && existsSync(this.rootfsOf(d)),
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
    this.imageLayouts.delete(def.name)
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
    this.buildAccess.set(name, { auth, maxBytes })
    try {
      await this.ensureTemplate(name, onProgress)
    } finally {
      this.buildAccess.delete(name)
    }
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
    return this.imageDigests.get(name)
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
    this.imageDigests.delete(name)
    this.imageLayouts.delete(name)
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

  /** The baked snapshot: template rootfs, guest daemon and default resources address it. */
  /** Bytes a built template takes on disk: its rootfs and its baked snapshot (hard links once, `du -sb`). */
  async sizeOf(name: string): Promise<number> {
    const def = this.definition(name)
    const dirs = [this.rootfsOf(def), this.snapshotOf(def)].filter((d) => existsSync(d))
    if (dirs.length === 0) return 0
    const { stdout } = await runDu(['-scb', ...dirs], { timeout: 120_000, killSignal: 'SIGKILL' })
    const total = /^(\d+)\s+total$/m.exec(stdout)?.[1]
    return Number(total ?? 0)
  }

  snapshotOf(def: TemplateDefinition): string {
    const key = createHash('sha256')
      .update(this.guestHash)
      .update(JSON.stringify(def.resources.defaults))
      .update(def.kernel?.preload ?? '')
      .update(def.kernel?.zygote === 'baked' ? 'zygote=baked' : '')
      .update(this.config.platform)
      .update('network=sandbox')
      // the guest reads its limits once, at the boot the snapshot keeps
      .update(def.limitAddressSpace ? '' : 'rlimit-as=none')
      .digest('hex')
      .slice(0, 16)
    return join(this.config.templatesDir, `${def.name}-${this.hashOf(def)}.snapshot-${key}`)
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
      if ((def.image && !this.imageDigests.has(def.name)) || (def.dockerfile && !this.builtRootfs.has(def.name))) {
        keep.prefixes.push(`${def.name}-`)
        continue
      }
      keep.names.add(basename(this.rootfsOf(def)))
      keep.names.add(basename(this.snapshotOf(def)))
      const digest = this.imageDigests.get(def.name)
      if (digest) keep.images.add(digest.replace(':', '-'))
    }
    return keep
  }

  /** A snapshot that would not restore was removed: the next start bakes it again. */
  forgetSnapshot(def: TemplateDefinition): void {
    this.snapshotChecked.delete(def.name)
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
          await this.resolveImage(def, onProgress)
          def = await this.withImageConfig(def, onProgress)
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
        const layout = this.imageLayouts.get(name)
        if (!existsSync(rootfs) && layout) await this.unpack(def, layout, rootfs, onProgress)
        else if (!existsSync(rootfs))
          await buildRootfs(def, rootfs, {
            mirror: this.config.mirror,
            debCacheDir: join(this.config.templatesDir, '.debs'),
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
            this.log(`baking ${name} failed: ${String(err)}`)
            return
          }
        }
        this.snapshotChecked.add(name)
        this.onReady(def)
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
    const built = await this.dockerfiles.buildDockerfile(
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

  /** A user's build also proves it may read its image: the pull cache is shared by every key. */
  private ociOptions(name: string): OciOptions {
    const access = this.buildAccess.get(name)
    return {
      ...this.oci,
      ...(access ? { auth: access.auth, verifyAccess: true } : {}),
      bound: tighter(this.oci.bound, quotaBound(access?.maxBytes)),
    }
  }

  /** Pins an image template to the digest its reference names now (the rootfs and snapshot are keyed by it). */
  private async resolveImage(def: TemplateDefinition, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    if (!def.image || this.imageDigests.has(def.name)) return
    onProgress?.({ template: def.name, phase: 'resolve', fraction: 0, message: def.image })
    this.imageDigests.set(def.name, await resolveImageDigest(def.image, this.ociOptions(def.name)))
  }

  /**
   * An image template's definition with its image's config under it (Docker's env, working dir and
   * user; what the definition sets wins), the image pulled into the cache if it was not there.
   */
  private async withImageConfig(
    def: TemplateDefinition,
    onProgress?: (p: TemplateProgress) => void,
  ): Promise<TemplateDefinition> {
    if (!def.image || this.imageLayouts.has(def.name)) return def
    const digest = this.imageDigests.get(def.name)
    if (!digest) throw new Error(`${def.name}: image digest not resolved`)
    onProgress?.({ template: def.name, phase: 'pull', fraction: 0, message: `${def.image} ${digest}` })
    const { layout } = await pullImage(def.image, digest, this.ociOptions(def.name))
    const image = readImageConfig(layout)
    const configured: TemplateDefinition = {
      ...def,
      env: { ...image.env, ...def.env },
      workdir: def.workdir ?? image.workdir,
      user: userNameOf(image.user) ?? def.user,
    }
    this.definitions.set(def.name, configured)
    this.imageLayouts.set(def.name, layout)
    return configured
  }

  private async unpack(
    def: TemplateDefinition,
    layout: string,
    rootfs: string,
    onProgress?: (p: TemplateProgress) => void,
  ): Promise<void> {
    onProgress?.({ template: def.name, phase: 'unpack', fraction: 0, message: layout })
    await unpackImage(layout, rootfs, this.ociOptions(def.name))
    onProgress?.({ template: def.name, phase: 'done', fraction: 1, message: rootfs })
  }

  /** Boots the template once, then checkpoints it into the snapshot store (write, then rename). */
  private async bake(def: TemplateDefinition): Promise<void> {
    const id = `bake-${def.name}-${randomBytes(6).toString('hex')}`
    const sbx = await this.containers.boot({
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
      await checkpointAndStop(this.containers.runsc, sbx, this.snapshotOf(def))
    } catch (err) {
      await this.containers.stop(id)
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
