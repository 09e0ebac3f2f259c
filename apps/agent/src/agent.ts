// The local agent: runs each sandbox as a runsc container whose init is the guest daemon. A thin
// front over its rooms: template baking, the warm pool, container lifecycle, checkpoints and the
// guest client.

import { randomBytes } from 'node:crypto'
import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type {
  AgentApi,
  AgentSandbox,
  AgentSandboxMethod,
  BuildLogLine,
  EgressPolicy,
  ForkOptions,
  ForkOutcome,
  ImageSource,
  PortConnection,
  PruneOptions,
  RegistryAuth,
  ResolvedResources,
  SandboxExitListener,
  SandboxUsage,
  SnapshotOptions,
  SnapshotResult,
  StartSandboxSpec,
  TemplateBuildResult,
  TemplateBuildSpec,
  TemplateInfo,
  TemplateProgress,
  TemplatePruneResult,
} from '@forkbox/protocol'
import { AppError, agentSandboxCalls, GuestEnded, SHA256_HEX, withUpload } from '@forkbox/protocol'
import type { AgentConfig } from './config.ts'
import { readGuestBundle } from './guest/bundle.ts'
import type { GuestClient } from './guest/client.ts'
import { installGuest } from './guest/install.ts'
import { NetworkManager, networkNames } from './network/manager.ts'
import { connectTcp } from './network/port-connection.ts'
import { PullNetwork } from './network/pull-network.ts'
import { fetchImage } from './remote/images.ts'
import { CallGate } from './sandboxes/call-gate.ts'
import { Checkpoints } from './sandboxes/checkpoints.ts'
import { Containers } from './sandboxes/containers.ts'
import { ImageStore } from './sandboxes/image-store.ts'
import { digestOf, expectedDigest } from './sandboxes/image-transfer.ts'
import { reconcile } from './sandboxes/recovery.ts'
import { WarmPool } from './sandboxes/warm-pool.ts'
import { imageDefaults as imageDefaultsOf, startImage, TemplateBaker } from './templates/baker.ts'
import type { BuildLogSink } from './templates/build-log.ts'
import {
  type TemplateBuildResult as BuiltRootfs,
  builtRootfsPath,
  TemplateBuilder,
  type TemplateBuildInput,
} from './templates/builder.ts'
import { builtDefinition, builtImage } from './templates/built-image.ts'
import type { TemplateDefinition } from './templates/definition.ts'
import { LayerStore, tempName } from './templates/layers.ts'
import type { OciOptions } from './templates/oci.ts'
import { pruneTemplatesDir, rootfsInUse } from './templates/prune.ts'
import { BUILT_ROOTFS, exportRootfs, importRootfs, rootfsDigest } from './templates/rootfs-transfer.ts'
import { buildUserTemplate, registerUserTemplate } from './templates/user-templates.ts'

const REFILL_DELAY_MS = 250
/** How long a final checkpoint (hibernate, migration) waits for the sandbox's calls under way to end. */
const FINAL_CHECKPOINT_WAIT_MS = 10_000
/** How often the warm pool is tended: quiet sandboxes frozen, the pool grown or shrunk to demand. */
const POOL_TEND_MS = 3_000
/** Calls that may last for ever (an attachment, a watch, a terminal): they do not hold a checkpoint back. */
const OPEN_ENDED: ReadonlySet<AgentSandboxMethod> = new Set(['attachProcess', 'watchDir', 'openPty'])

function log(message: string): void {
  process.stderr.write(`forkbox agent: ${message}\n`)
}

function sameResources(a: StartSandboxSpec['resources'], b: StartSandboxSpec['resources']): boolean {
  return a.vcpus === b.vcpus && a.memoryMB === b.memoryMB && a.diskMB === b.diskMB && a.pids === b.pids
}

export class LocalAgent implements AgentApi {
  private readonly containers: Containers
  private readonly baker: TemplateBaker
  private readonly pool: WarmPool
  private readonly poolTender: NodeJS.Timeout
  private readonly checkpoints: Checkpoints
  private readonly imageStore: ImageStore | null
  private readonly gate = new CallGate()
  private readonly layers: LayerStore
  private readonly builder: TemplateBuilder
  /** The pull cache and registry settings every image pull and archive import goes through. */
  private readonly oci: OciOptions
  /** Builds running now: `close` aborts them and waits until each has taken its mounts down. */
  /** The guest and its runtime as installed in the templates dir (kept by a prune). */
  private readonly guestDirs: string[]
  private readonly builds = new Set<{ abort: AbortController; done: Promise<unknown> }>()
  /** Where registry pulls run: a namespace with a sandbox's egress rules (allow-listed registries aside). */
  private readonly pulls: PullNetwork

  constructor(private readonly config: AgentConfig) {
    const tag = `${config.cgroupParent}:${config.runscStateDir}`
    const network = new NetworkManager(
      {
        tag,
        subnet: config.networkSubnet,
        operatorAllowed: config.networkAllowPrivate,
        dnsUpstreams: config.dnsUpstreams,
        spareSlots: config.spareNetworkSlots,
      },
      log,
    )
    for (const d of [config.dataDir, join(config.dataDir, 'sandboxes'), config.templatesDir, config.runscStateDir])
      mkdirSync(d, { recursive: true })
    const guest = installGuest(config.templatesDir, readGuestBundle(config.guestDir), config.guestPython)
    const runsc = {
      runscPath: config.runscPath,
      stateDir: config.runscStateDir,
      platform: config.platform,
      debugDir: config.runscDebugDir,
    }
    this.containers = new Containers(config, runsc, network, guest, log)
    this.guestDirs = [guest.dir, guest.runtimeDir]
    this.pulls = new PullNetwork(
      {
        ready: () => this.containers.networkReady(),
        acquire: () => network.acquire(),
        apply: (slot, policy) => network.apply(slot, policy),
        release: (slot) => network.release(slot),
      },
      config.registryAllow,
      networkNames(tag).netnsPrefix,
    )
    this.layers = new LayerStore(config.templatesDir)
    this.oci = {
      cacheDir: join(config.templatesDir, '.oci'),
      insecureRegistries: config.insecureRegistries,
      log,
      network: this.pulls,
      bound: { maxBytes: config.maxImageMB * 1024 * 1024, by: 'image' },
      scratchDir: this.layers.root,
    }
    this.baker = new TemplateBaker(
      config,
      this.containers,
      guest.hash,
      (def) => this.baker.isBuiltIn(def.name) && this.pool.refill(def),
      log,
      this.oci,
      // the agent's buildDockerfile runs the builder made below; the baker calls it only later
      this,
    )
    this.pool = new WarmPool(config, this.containers, this.baker, log)
    // pooled sandboxes only wait: frozen once quiet, thawed when claimed; pools sized to demand
    this.poolTender = setInterval(() => this.pool.tend(config.freezeMaxCpuPercent), POOL_TEND_MS)
    this.poolTender.unref()
    this.checkpoints = new Checkpoints(config, this.containers, this.baker)
    this.imageStore = config.imageStore ? new ImageStore(config.imageStore) : null
    this.builder = new TemplateBuilder({
      templatesDir: config.templatesDir,
      containers: this.containers,
      layers: this.layers,
      oci: this.oci,
      caBundle: config.buildCaBundle,
      maxImageBytes: config.maxImageMB * 1024 * 1024,
      templateRootfs: async (name) => {
        const def = this.baker.definition(name)
        await this.baker.ensureTemplate(name)
        return this.baker.rootfsOf(def)
      },
    })
  }

  /**
   * Builds a Dockerfile into a template rootfs: every step in a build sandbox, each step's result a
   * cached layer (a rebuild starts at the first changed step). `onLog` gets the steps as they run.
   */
  async buildDockerfile(input: TemplateBuildInput, onLog?: BuildLogSink, signal?: AbortSignal): Promise<BuiltRootfs> {
    const abort = new AbortController()
    const onAbort = () => abort.abort()
    if (signal?.aborted) abort.abort()
    signal?.addEventListener('abort', onAbort)
    const done = this.builder.build(input, onLog, abort.signal)
    const entry = { abort, done: done.catch(() => {}) }
    this.builds.add(entry)
    try {
      return await done
    } finally {
      this.builds.delete(entry)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  async templates(): Promise<TemplateInfo[]> {
    return this.baker.templates()
  }

  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    return this.baker.ensureTemplate(name, onProgress)
  }

  async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
    upload?: AsyncIterable<Uint8Array>,
  ): Promise<TemplateBuildResult> {
    const deps = { baker: this.baker, templatesDir: this.config.templatesDir, dockerfiles: this, oci: this.oci }
    if (!upload) return this.withRootfsDigest(await buildUserTemplate(deps, spec, onLog, signal, registryAuth))
    const dir = join(this.config.dataDir, 'uploads')
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const path = join(dir, `${randomBytes(8).toString('hex')}.tar`)
    try {
      await pipeline(Readable.from(upload), createWriteStream(path, { mode: 0o600 }), { signal })
      return this.withRootfsDigest(await buildUserTemplate(deps, withUpload(spec, path), onLog, signal, registryAuth))
    } finally {
      rmSync(path, { force: true })
    }
  }

  /** A build's result with its rootfs's name and hash: the record other hosts' pulls of it are checked against. */
  private async withRootfsDigest(result: TemplateBuildResult): Promise<TemplateBuildResult> {
    const { source } = result.pinned
    if (!this.config.recordRootfsDigests || source.kind !== 'dockerfile' || !source.built) return result
    const dir = builtRootfsPath(this.config.templatesDir, source.built.key)
    if (!existsSync(dir)) return result
    return { ...result, rootfs: { name: basename(dir), sha256: await rootfsDigest(dir) } }
  }

  async registerTemplates(specs: TemplateBuildSpec[]): Promise<void> {
    for (const spec of specs) registerUserTemplate(this.baker, this.config.templatesDir, spec)
  }

  /**
   * Makes a build's rootfs the template `name` (resources: its defaults and maxima), baked on first
   * use like the built-in ones (used by tests that build without the control plane).
   */
  registerBuiltTemplate(name: string, built: BuiltRootfs, resources: ResolvedResources): void {
    const description = `built from a Dockerfile (${built.key.slice(0, 12)})`
    const def = builtDefinition(name, description, builtImage(built), { defaults: resources, maxima: resources })
    this.baker.registerBuilt(def, built.rootfs)
  }

  removeTemplate(name: string): Promise<void> {
    return this.baker.remove(name)
  }

  async pruneTemplates(opts: PruneOptions = {}): Promise<TemplatePruneResult> {
    const { templatesDir } = this.config
    const layerCacheBytes = opts.layerCacheBytes ?? this.config.layerCacheMB * 1024 * 1024
    // a key's own layers first: its builds cannot push the cache past what its quota lets it keep
    const own = opts.owner ? await this.layers.evict(opts.owner.maxBytes, opts.owner.keyId) : null
    if (opts.layersOnly) {
      const all = await this.layers.evict(layerCacheBytes)
      return own ? { removed: [...own.removed, ...all.removed], freedBytes: own.freedBytes + all.freedBytes } : all
    }
    const keep = this.baker.inUse()
    for (const dir of this.guestDirs) keep.names.add(basename(dir))
    for (const name of rootfsInUse(this.containers.sandboxesDir, templatesDir)) keep.names.add(name)
    const result = await pruneTemplatesDir(templatesDir, keep, {
      layers: this.layers,
      layerCacheBytes,
      buildsRunning: this.builds.size > 0,
    })
    if (result.removed.length > 0)
      log(`pruned ${result.removed.length} template artifacts (${(result.freedBytes / 2 ** 20).toFixed(0)} MiB)`)
    return result
  }

  /** After a restart: re-attaches what still runs, removes what no one owns. */
  async reconcile(): Promise<string[]> {
    const removed = await reconcile(this.containers, this.config, log)
    // after the containers: a build sandbox left running would hold its step's mount
    return [...removed, ...(await this.layers.reconcile())]
  }

  /** From a user snapshot; else a pooled sandbox, a restore of the template's snapshot, or a cold boot. */
  async start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void> {
    const { snapshot } = spec
    if (snapshot) return this.checkpoints.restore({ ...spec, snapshot }, signal)
    const def = this.baker.definition(spec.template)
    await this.baker.ensureTemplate(spec.template)
    const image = this.baker.snapshotOf(def)
    const standard = sameResources(spec.resources, def.resources.defaults)
    // only built-in templates keep warm sandboxes: a user's template is a restore
    if (standard && this.baker.isBuiltIn(def.name)) {
      const claimed = await this.pool.claim(def, spec)
      // a restore is CPU-bound: let the claimed sandbox's first requests go before refilling
      setTimeout(() => this.pool.refill(def), REFILL_DELAY_MS).unref()
      if (claimed) return
    }
    if (standard && existsSync(image)) {
      try {
        await this.boot(def, spec, image, signal)
        return
      } catch (err) {
        if (signal?.aborted) throw err
        // A snapshot that will not restore is rebuilt on the next start; this one cold-boots.
        log(`restore of ${image} failed, cold-booting instead: ${String(err)}`)
        rmSync(image, { recursive: true, force: true })
        this.baker.forgetSnapshot(def)
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
    const rootfs = this.baker.rootfsOf(def)
    const envs = { ...def.env, ...spec.envs }
    const imageDefaults = imageDefaultsOf(def)
    const sbx = await this.containers.boot(
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
        await this.containers.stop(spec.id)
        throw err
      })
  }

  fork(sourceId: string, children: Omit<StartSandboxSpec, 'snapshot'>[], opts?: ForkOptions): Promise<ForkOutcome[]> {
    // a call of the source's: it is not frozen under its checkpoint, and a hibernate waits for it
    return this.gate.run(sourceId, () => this.checkpoints.fork(sourceId, children, opts))
  }

  private guest(id: string): GuestClient {
    return this.containers.live(id).guest
  }

  sandbox(id: string): AgentSandbox {
    return agentSandboxCalls((method, args) =>
      this.gate.run(
        id,
        async () => (this.guest(id)[method] as (...a: unknown[]) => unknown)(...args),
        !OPEN_ENDED.has(method),
      ),
    )
  }

  async snapshot(id: string, snapshotId: string, opts: SnapshotOptions = {}): Promise<SnapshotResult> {
    const made = await this.checkpoint(id, snapshotId, opts)
    if (!opts.digest) return made
    // hashed after the sandbox carries on: the stream another host would get, read once here
    return { ...made, sha256: await digestOf(this.checkpoints.exportSnapshot(snapshotId)) }
  }

  private async checkpoint(id: string, snapshotId: string, opts: SnapshotOptions): Promise<{ sizeBytes: number }> {
    if (!opts.final) return this.gate.run(id, () => this.checkpoints.snapshot(id, snapshotId))
    // the last image before the sandbox leaves: what runs finishes (a while), nothing new starts
    await this.gate.close(id, this.containers.live(id).exited, FINAL_CHECKPOINT_WAIT_MS)
    try {
      if (opts.freshStart) await this.startFresh(id, opts.freshStart.template)
      return await this.checkpoints.snapshot(id, snapshotId)
    } catch (err) {
      this.gate.reopen(id)
      throw err
    }
  }

  /**
   * Ends every process in the sandbox and starts its template's start command again (and waits
   * for it to be ready), as a boot would: what a filesystem-only pause keeps. A template gone
   * since has no start command to run.
   */
  private async startFresh(id: string, template: string): Promise<void> {
    const sbx = this.containers.live(id)
    const { ended } = await sbx.conn.call({ op: 'end_processes' }, GuestEnded)
    log(`${id}: ${ended} processes ended for a fresh start`)
    let def: TemplateDefinition
    try {
      def = this.baker.definition(template)
    } catch {
      return
    }
    await startImage(def, sbx)
  }

  async exportSnapshot(snapshotId: string, skip = 0) {
    return this.checkpoints.exportSnapshot(snapshotId, skip)
  }

  importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>): Promise<void> {
    // relayed by the control plane, with its record of the image (the exporter's hash for an older one)
    return this.checkpoints.importSnapshot(snapshotId, body, { sha256, source: 'sender' })
  }

  async pullSnapshot(snapshotId: string, from: ImageSource): Promise<void> {
    const recorded = recordedDigest(from.sha256)
    if ('url' in from) {
      const { body, sha256 } = await fetchImage(from.url)
      return this.checkpoints.importSnapshot(snapshotId, body, expectedDigest(recorded, sha256))
    }
    if (!this.imageStore) throw new AppError('SNAPSHOT_NOT_FOUND', 'this host mounts no image store')
    // the store is written by every host mounting it: its own hash file proves nothing
    const { body, sha256 } = await this.imageStore.get(snapshotId)
    await this.checkpoints.importSnapshot(snapshotId, body, expectedDigest(recorded, sha256))
  }

  /** Pulls of built templates' rootfs under way, by name: a second caller waits for the first. */
  private readonly rootfsPulls = new Map<string, Promise<void>>()

  pullRootfs(rootfs: string, from: { url: string; sha256: string | null }): Promise<void> {
    if (!BUILT_ROOTFS.test(rootfs))
      return Promise.reject(new AppError('VALIDATION_FAILED', `not a template image name: ${rootfs}`))
    let recorded: string | null
    try {
      recorded = recordedDigest(from.sha256)
    } catch (err) {
      return Promise.reject(err)
    }
    let pull = this.rootfsPulls.get(rootfs)
    if (!pull) {
      pull = (async () => {
        const started = performance.now()
        const { body, sha256 } = await fetchImage(from.url)
        const dir = join(this.config.templatesDir, rootfs)
        // unpacked under the layer store's root: a pull cut by a crash is removed at the next start
        const expected = expectedDigest(recorded, sha256)
        const bytes = await importRootfs(dir, join(this.layers.root, tempName()), body, expected)
        log(
          `template image ${rootfs} pulled from a peer: ${bytes} bytes in ${Math.round(performance.now() - started)} ms`,
        )
      })().finally(() => this.rootfsPulls.delete(rootfs))
      this.rootfsPulls.set(rootfs, pull)
    }
    return pull
  }

  /** A built template's rootfs (`built-…`) as a tar stream from byte `skip` on, for a peer pulling it. */
  exportRootfs(rootfs: string, skip = 0) {
    return exportRootfs(join(this.config.templatesDir, rootfs), skip)
  }

  async storeSnapshot(snapshotId: string): Promise<boolean> {
    if (!this.imageStore) return false
    await this.imageStore.put(snapshotId, this.checkpoints.exportSnapshot(snapshotId))
    return true
  }

  /** The shared image store's id, when this host mounts one. */
  get imageStoreId(): string | undefined {
    return this.imageStore?.id
  }

  async deleteSnapshot(snapshotId: string, opts: { stored?: boolean } = {}): Promise<void> {
    if (opts.stored) this.imageStore?.drop(snapshotId)
    await this.checkpoints.deleteSnapshot(snapshotId)
  }

  async pruneSnapshots(keep: string[]): Promise<void> {
    this.imageStore?.prune(keep)
    await this.checkpoints.pruneSnapshots(keep)
  }

  async freeze(id: string): Promise<boolean> {
    const sbx = this.containers.peek(id)
    if (!sbx || this.gate.busy(id)) return false
    return this.containers.freezeIfQuiet(sbx, this.config.freezeMaxCpuPercent)
  }

  stop(id: string): Promise<void> {
    return this.containers.stop(id)
  }

  async usage(): Promise<SandboxUsage[]> {
    return this.containers.usage()
  }

  async setNetwork(id: string, policy: EgressPolicy): Promise<void> {
    await this.containers.setPolicy(this.containers.live(id), policy)
  }

  async sandboxAddress(id: string): Promise<string> {
    return this.containers.live(id).slot.sandboxIp
  }

  async connectPort(
    id: string,
    port: number,
    onData: (chunk: Uint8Array) => void | Promise<void>,
  ): Promise<PortConnection> {
    return connectTcp(this.containers.live(id).slot.sandboxIp, port, onData)
  }

  async poolSizes(): Promise<Record<string, number>> {
    return this.pool.sizes()
  }

  async liveIds(): Promise<string[]> {
    return this.containers.liveIds()
  }

  onExit(listener: SandboxExitListener): void {
    this.containers.onExit(listener)
  }

  /** Stops every sandbox and waits for all teardown to finish. */
  async close(): Promise<void> {
    clearInterval(this.poolTender)
    for (const b of this.builds) b.abort.abort()
    await Promise.all([...this.builds].map((b) => b.done))
    await this.pool.close()
    await this.pulls.close()
    await this.containers.close()
    this.checkpoints.close()
  }
}

/** The control plane's record of an image's hash, as a pull names it (null: an image older than records). */
function recordedDigest(sha256: unknown): string | null {
  if (sha256 === null || sha256 === undefined) return null
  if (typeof sha256 !== 'string' || !SHA256_HEX.test(sha256))
    throw new AppError('VALIDATION_FAILED', 'an image pull names a malformed sha256')
  return sha256
}
