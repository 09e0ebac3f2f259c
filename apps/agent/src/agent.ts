// The local agent: runs each sandbox as a runsc container whose init is the guest daemon. A thin
// front over its rooms: template baking, Dockerfile builds, the warm pool, container lifecycle,
// checkpoints, images between hosts and the guest client.

import { mkdirSync } from 'node:fs'
import { basename, join } from 'node:path'
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
import { agentSandboxCalls } from '@forkbox/protocol'
import type { AgentConfig } from './config.ts'
import { readGuestBundle } from './guest/bundle.ts'
import type { GuestClient } from './guest/client.ts'
import { installGuest } from './guest/install.ts'
import { NetworkManager, networkNames } from './network/manager.ts'
import { connectTcp } from './network/port-connection.ts'
import { PullNetwork } from './network/pull-network.ts'
import { ImageExchange } from './remote/image-exchange.ts'
import { SandboxStarter } from './sandbox-start.ts'
import { CallGate } from './sandboxes/call-gate.ts'
import { Checkpoints } from './sandboxes/checkpoints.ts'
import { Containers } from './sandboxes/containers.ts'
import { ImageStore } from './sandboxes/image-store.ts'
import { reconcile } from './sandboxes/recovery.ts'
import { WarmPool } from './sandboxes/warm-pool.ts'
import { TemplateBaker } from './templates/baker.ts'
import type { BuildLogSink } from './templates/build-log.ts'
import type { TemplateBuildResult as BuiltRootfs, TemplateBuildInput } from './templates/builder.ts'
import { builtDefinition, builtImage } from './templates/built-image.ts'
import { DockerfileBuilds } from './templates/dockerfile-builds.ts'
import { LayerStore } from './templates/layers.ts'
import type { OciOptions } from './templates/oci.ts'
import { pruneTemplatesDir, rootfsInUse } from './templates/prune.ts'
import { UserBuilds } from './templates/user-builds.ts'

/** How long a final checkpoint (hibernate, migration) waits for the sandbox's calls under way to end. */
const FINAL_CHECKPOINT_WAIT_MS = 10_000
/** How often the warm pool is tended: quiet sandboxes frozen, the pool grown or shrunk to demand. */
const POOL_TEND_MS = 3_000
/** Calls that may last for ever (an attachment, a watch, a terminal): they do not hold a checkpoint back. */
const OPEN_ENDED: ReadonlySet<AgentSandboxMethod> = new Set(['attachProcess', 'watchDir', 'openPty'])

function log(message: string): void {
  process.stderr.write(`forkbox agent: ${message}\n`)
}

export class LocalAgent implements AgentApi {
  private readonly containers: Containers
  private readonly baker: TemplateBaker
  private readonly pool: WarmPool
  private readonly poolTender: NodeJS.Timeout
  private readonly checkpoints: Checkpoints
  /** How a sandbox starts: a restore, a pooled sandbox, a boot. */
  private readonly starter: SandboxStarter
  /** Snapshots' images and built templates' rootfs between hosts. */
  private readonly images: ImageExchange
  private readonly gate = new CallGate()
  private readonly layers: LayerStore
  /** Builds running now: `close` aborts them and waits until each has taken its mounts down. */
  private readonly dockerfiles: DockerfileBuilds
  /** Users' template builds: uploads, build and bake, the rootfs's recorded hash. */
  private readonly userBuilds: UserBuilds
  /** The pull cache and registry settings every image pull and archive import goes through. */
  private readonly oci: OciOptions
  /** The guest and its runtime as installed in the templates dir (kept by a prune). */
  private readonly guestDirs: string[]
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
    this.dockerfiles = new DockerfileBuilds({
      templatesDir: config.templatesDir,
      containers: this.containers,
      layers: this.layers,
      oci: this.oci,
      caBundle: config.buildCaBundle,
      maxImageBytes: config.maxImageMB * 1024 * 1024,
      // a build's FROM forkbox:NAME reaches the baker made below, only later
      templateRootfs: (name) => this.baker.readyRootfs(name),
    })
    this.baker = new TemplateBaker({
      config,
      containers: this.containers,
      guestHash: guest.hash,
      onReady: (def) => this.baker.isBuiltIn(def.name) && this.pool.refill(def),
      log,
      oci: this.oci,
      dockerfiles: this.dockerfiles,
    })
    this.pool = new WarmPool(config, this.containers, this.baker, log)
    // pooled sandboxes only wait: frozen once quiet, thawed when claimed; pools sized to demand
    this.poolTender = setInterval(() => this.pool.tend(config.freezeMaxCpuPercent), POOL_TEND_MS)
    this.poolTender.unref()
    this.checkpoints = new Checkpoints(config, this.containers, this.baker)
    this.starter = new SandboxStarter({
      baker: this.baker,
      pool: this.pool,
      checkpoints: this.checkpoints,
      containers: this.containers,
      log,
    })
    this.userBuilds = new UserBuilds({
      baker: this.baker,
      templatesDir: config.templatesDir,
      dockerfiles: this.dockerfiles,
      oci: this.oci,
      uploadsDir: join(config.dataDir, 'uploads'),
      recordRootfsDigests: config.recordRootfsDigests,
    })
    this.images = new ImageExchange({
      checkpoints: this.checkpoints,
      imageStore: config.imageStore ? new ImageStore(config.imageStore) : null,
      templatesDir: config.templatesDir,
      scratchDir: this.layers.root,
      log,
    })
  }

  /**
   * Builds a Dockerfile into a template rootfs: every step in a build sandbox, each step's result a
   * cached layer (a rebuild starts at the first changed step). `onLog` gets the steps as they run.
   */
  buildDockerfile(input: TemplateBuildInput, onLog?: BuildLogSink, signal?: AbortSignal): Promise<BuiltRootfs> {
    return this.dockerfiles.buildDockerfile(input, onLog, signal)
  }

  async templates(): Promise<TemplateInfo[]> {
    return this.baker.templates()
  }

  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    return this.baker.ensureTemplate(name, onProgress)
  }

  buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
    upload?: AsyncIterable<Uint8Array>,
  ): Promise<TemplateBuildResult> {
    return this.userBuilds.build(spec, onLog, signal, registryAuth, upload)
  }

  async registerTemplates(specs: TemplateBuildSpec[]): Promise<void> {
    this.userBuilds.register(specs)
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
      buildsRunning: this.dockerfiles.busy,
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
  start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void> {
    return this.starter.start(spec, signal)
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
    return { ...made, sha256: await this.images.digest(snapshotId) }
  }

  private async checkpoint(id: string, snapshotId: string, opts: SnapshotOptions): Promise<{ sizeBytes: number }> {
    if (!opts.final) return this.gate.run(id, () => this.checkpoints.snapshot(id, snapshotId))
    // the last image before the sandbox leaves: what runs finishes (a while), nothing new starts
    await this.gate.close(id, this.containers.live(id).exited, FINAL_CHECKPOINT_WAIT_MS)
    try {
      if (opts.freshStart) await this.starter.startFresh(id, opts.freshStart.template)
      return await this.checkpoints.snapshot(id, snapshotId)
    } catch (err) {
      this.gate.reopen(id)
      throw err
    }
  }

  async exportSnapshot(snapshotId: string, skip = 0) {
    return this.images.exportSnapshot(snapshotId, skip)
  }

  importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>): Promise<void> {
    return this.images.importSnapshot(snapshotId, body, sha256)
  }

  pullSnapshot(snapshotId: string, from: ImageSource): Promise<void> {
    return this.images.pullSnapshot(snapshotId, from)
  }

  pullRootfs(rootfs: string, from: { url: string; sha256: string | null }): Promise<void> {
    return this.images.pullRootfs(rootfs, from)
  }

  /** A built template's rootfs (`built-…`) as a tar stream from byte `skip` on, for a peer pulling it. */
  exportRootfs(rootfs: string, skip = 0) {
    return this.images.exportRootfs(rootfs, skip)
  }

  storeSnapshot(snapshotId: string): Promise<boolean> {
    return this.images.storeSnapshot(snapshotId)
  }

  /** The shared image store's id, when this host mounts one. */
  get imageStoreId(): string | undefined {
    return this.images.imageStoreId
  }

  deleteSnapshot(snapshotId: string, opts: { stored?: boolean } = {}): Promise<void> {
    return this.images.deleteSnapshot(snapshotId, opts)
  }

  pruneSnapshots(keep: string[]): Promise<void> {
    return this.images.pruneSnapshots(keep)
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
    await this.dockerfiles.close()
    await this.pool.close()
    await this.pulls.close()
    await this.containers.close()
    this.checkpoints.close()
  }
}
