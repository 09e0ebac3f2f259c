// The local agent: runs each sandbox as a runsc container whose init is the guest daemon, and
// turns AgentApi calls into guest requests over that container's stdio.
import { type ChildProcess, spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import type { EgressPolicy as NetworkPolicy, ResolvedResources, SandboxUsage } from '@forkbox/protocol'
import {
  type AgentApi,
  AppError,
  CodeContext,
  type FileEntry,
  GuestAttachEnd,
  GuestCellResult,
  GuestContextList,
  type GuestContextOp,
  GuestEmpty,
  type GuestExecOutput,
  type GuestExecRequest,
  GuestExit,
  type GuestFileOp,
  GuestProcessList,
  type GuestProcessOp,
  GuestProcessStarted,
  GuestResult,
  type GuestRunCodeOutput,
  type GuestRunCodeRequest,
  type ProcessExit,
  ProcessInfo,
  type PtySession,
  type PtySpec,
  type RunCodeHandlers,
  type SandboxErrorReason,
  type SandboxExitListener,
  type StartSandboxSpec,
  type StreamHandlers,
  type TemplateInfo,
  type TemplateProgress,
} from '@forkbox/protocol'
import type { AgentConfig } from './config.ts'
import { readGuestBundle } from './guest/bundle.ts'
import { type DataFrameType, GuestConnection } from './guest/connection.ts'
import { createGuestFifos, type GuestPipes, hasGuestFifos, openGuestPipes } from './guest/fifo.ts'
import { FileReadStream } from './guest/file-read.ts'
import { FrameType } from './guest/frames.ts'
import { CLOSED, NetworkManager, type Slot } from './network/manager.ts'
import {
  cgroupExists,
  createCgroup,
  limitCpu,
  limitHit,
  listCgroups,
  readUsage,
  removeCgroup,
} from './runtime/cgroups.ts'
import { buildSpec, cgroupLimits } from './runtime/oci-spec.ts'
import {
  killAll,
  type RunscOptions,
  runscCheckpoint,
  runscDelete,
  runscGlobalArgs,
  runscKill,
  runscList,
  runscProcesses,
  runscSignal,
  startCommand,
  waitForRunscProcesses,
} from './runtime/runsc.ts'
import { buildRootfs } from './templates/build.ts'
import { loadDefinitions, type TemplateDefinition, templateHash } from './templates/definition.ts'

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The per-stream cap of output that is buffered until the request ends (0 asks for none: the most). */
function bufferCap(maxOutputBytes: number): number {
  return maxOutputBytes > 0 ? Math.min(maxOutputBytes, MAX_BUFFERED_OUTPUT_BYTES) : MAX_BUFFERED_OUTPUT_BYTES
}

function sameResources(a: ResolvedResources, b: ResolvedResources): boolean {
  return a.vcpus === b.vcpus && a.memoryMB === b.memoryMB && a.diskMB === b.diskMB && a.pids === b.pids
}

/** Written into each bundle dir: what a restarted agent needs to re-attach the sandbox. */
const BUNDLE_RECORD = 'forkbox.json'
/** Ids of the agent's own sandboxes: baking a template, or waiting in the warm pool. */
const INTERNAL_ID = /^(pool|bake)-/
interface BundleRecord {
  id: string
  vcpus: number
  /** Its network slot and policy, for a restarted agent to take back. */
  slot: number
  network: NetworkPolicy
}
const READY_TIMEOUT_MS = 30_000
const STDIN_CHUNK = 256 * 1024
/** Bytes of streamed output the guest may send ahead of the consumer (per stream request). */
const STREAM_WINDOW = 1024 * 1024
/** Extra time the agent gives the guest to report a timed-out exec before giving up on it. */
const EXEC_GRACE_MS = 10_000
/** Output a command or cell that is waited on may buffer per stream when its request sets no cap. */
const MAX_BUFFERED_OUTPUT_BYTES = 64 * 1024 * 1024
/** The guest cuts output at the request's cap itself; past the cap and this, it is broken (or forged). */
const OUTPUT_SLACK_BYTES = 64 * 1024
/** Rich outputs (plots, HTML) of one cell; past this they are dropped and the cell is `truncated`. */
const MAX_DISPLAY_BYTES = 64 * 1024 * 1024
const OUTPUT_TYPES: readonly DataFrameType[] = [FrameType.stdout, FrameType.stderr]
const REFILL_DELAY_MS = 250
const BAKE_RETRY_MS = 10 * 60_000

interface LiveSandbox {
  /** The sandbox id the control plane knows; a pooled sandbox gets one when it is claimed. */
  id: string
  /** runsc container id, also naming its bundle dir and cgroup. */
  container: string
  dir: string
  cgroup: string
  vcpus: number
  slot: Slot
  /** The runsc process we started; null for a sandbox re-attached after a restart. */
  proc: ChildProcess | null
  conn: GuestConnection
  pipes: GuestPipes
  stopping: boolean
  exited: Promise<void>
}

/**
 * Streamed output handed to its consumer in order; once the consumer is done with a chunk, the
 * guest is told it may send that many bytes more (its flow-control window).
 */
class AckedDelivery {
  private tail = Promise.resolve()

  constructor(
    private readonly conn: GuestConnection,
    private readonly channel: () => number,
  ) {}

  push(deliver: () => void | Promise<void>, bytes: number): void {
    this.tail = this.tail
      .then(deliver)
      .catch(() => {})
      .then(() => {
        if (bytes > 0) this.conn.ack(this.channel(), bytes)
      })
  }

  /** Settles once everything pushed so far has been delivered. */
  done(): Promise<void> {
    return this.tail
  }
}

export class LocalAgent implements AgentApi {
  private readonly sandboxes = new Map<string, LiveSandbox>()
  private readonly listeners: SandboxExitListener[] = []
  private readonly definitions: Map<string, TemplateDefinition>
  private readonly builds = new Map<string, Promise<void>>()
  private readonly cleanups = new Set<Promise<void>>()
  private readonly runsc: RunscOptions

  private readonly snapshotChecked = new Set<string>()
  private readonly bakeFailedAt = new Map<string, number>()
  private readonly pools = new Map<string, LiveSandbox[]>()
  private readonly filling = new Map<string, Promise<void>>()
  private closing = false
  /** The guest daemon and its kernel as bind-mounted into sandboxes: a content-addressed copy in
   * the template store, so a baked snapshot finds them at the same path whichever checkout runs
   * the agent. */
  private readonly guestDir: string
  private readonly guestHash: string
  private readonly network: NetworkManager
  private networkUp: Promise<void> | null = null

  constructor(private readonly config: AgentConfig) {
    this.network = new NetworkManager(
      {
        tag: `${config.cgroupParent}:${config.runscStateDir}`,
        subnet: config.networkSubnet,
        operatorAllowed: config.networkAllowPrivate,
        dnsUpstreams: config.dnsUpstreams,
        spareSlots: config.spareNetworkSlots,
      },
      (m) => this.log(m),
    )
    this.definitions = loadDefinitions(config.definitionsDir)
    const { files, hash } = readGuestBundle(config.guestDir)
    this.guestHash = hash
    this.guestDir = join(config.templatesDir, `guest-${this.guestHash}`)
    this.runsc = { runscPath: config.runscPath, stateDir: config.runscStateDir, platform: config.platform }
    for (const d of [config.dataDir, this.sandboxesDir, config.templatesDir, config.runscStateDir])
      mkdirSync(d, { recursive: true })
    if (!existsSync(this.guestDir)) {
      const tmp = `${this.guestDir}.tmp-${process.pid}`
      mkdirSync(tmp, { recursive: true })
      for (const f of files) {
        mkdirSync(dirname(join(tmp, f.name)), { recursive: true })
        writeFileSync(join(tmp, f.name), f.body, { mode: 0o644 })
      }
      renameSync(tmp, this.guestDir)
    }
  }

  private get sandboxesDir(): string {
    return join(this.config.dataDir, 'sandboxes')
  }

  private rootfsOf(def: TemplateDefinition): string {
    return join(this.config.templatesDir, `${def.name}-${templateHash(def)}`)
  }

  templates(): TemplateInfo[] {
    return [...this.definitions.values()].map((d) => ({
      name: d.name,
      description: d.description,
      defaults: d.resources.defaults,
      maxima: d.resources.maxima,
      ready: existsSync(this.rootfsOf(d)),
    }))
  }

  private definition(name: string): TemplateDefinition {
    const def = this.definitions.get(name)
    if (!def) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${name}`)
    return def
  }

  /** The baked snapshot: template rootfs, guest daemon and default resources address it. */
  private snapshotOf(def: TemplateDefinition): string {
    const key = createHash('sha256')
      .update(this.guestHash)
      .update(JSON.stringify(def.resources.defaults))
      .update(def.kernel?.preload ?? '')
      .update(this.config.platform)
      .update('network=sandbox')
      .digest('hex')
      .slice(0, 16)
    return join(this.config.templatesDir, `${def.name}-${templateHash(def)}.snapshot-${key}`)
  }

  /** Builds the rootfs (once, cached) and bakes the template's snapshot (once, cached). */
  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    const def = this.definition(name)
    if (this.snapshotChecked.has(name)) return Promise.resolve()
    let build = this.builds.get(name)
    if (!build) {
      build = (async () => {
        const rootfs = this.rootfsOf(def)
        if (!existsSync(rootfs))
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
            this.log(`baking ${name} failed: ${String(err)}`)
            return
          }
        }
        this.snapshotChecked.add(name)
        this.refill(def)
      })().finally(() => this.builds.delete(name))
      this.builds.set(name, build)
    }
    return build
  }

  /** Boots the template once, then checkpoints it into the snapshot store (write, then rename). */
  private async bake(def: TemplateDefinition): Promise<void> {
    const id = `bake-${def.name}-${randomBytes(6).toString('hex')}`
    const sbx = await this.boot(def, { id, template: def.name, resources: def.resources.defaults, envs: {} }, null)
    try {
      await this.warmUp(def, id)
      await this.checkpointAndStop(sbx, this.snapshotOf(def))
    } catch (err) {
      await this.stop(id)
      throw err
    }
  }

  /**
   * Runs what a first request runs, so its code paths, page tables and file caches are warm:
   * before a bake (captured in the snapshot) and after a pool restore (a restored sandbox's first
   * exec took 50-70 ms in the guest against ~25 ms for the next).
   */
  private async warmUp(def: TemplateDefinition, id: string): Promise<void> {
    const exec = { timeoutMs: 10_000, maxOutputBytes: 1024 }
    if (def.kernel) {
      // the template's kernel, started with its preload: the first cell of a sandbox skips both
      await this.live(id).conn.call({ op: 'context_ready', language: 'python' })
      const cell = { language: 'python', timeoutMs: 30_000, maxOutputBytes: 1024, silent: true }
      await this.runCode(id, { ...cell, code: 'None' })
    }
    await this.exec(id, { argv: ['true'], ...exec })
    await this.exec(id, { cmd: 'true', ...exec })
    await this.writeFile(
      id,
      '/tmp/.forkbox-warm',
      (async function* () {
        yield new Uint8Array(1)
      })(),
    )
    await this.fileOp(id, { op: 'remove', path: '/tmp/.forkbox-warm', recursive: false })
  }

  private log(message: string): void {
    process.stderr.write(`forkbox agent: ${message}\n`)
  }

  /**
   * Takes back the running sandboxes a previous agent process left (see `reattach`), then removes
   * every container, cgroup and bundle dir no live sandbox owns.
   */
  async reconcile(): Promise<string[]> {
    await this.networkReady()
    const removed = new Set<string>()
    const owned = new Set([...this.sandboxes.values()].map((s) => s.container))
    for (const c of await runscList(this.runsc).catch(() => [])) {
      if (owned.has(c.id)) continue
      if (c.status === 'running' && (await this.reattach(c.id))) {
        owned.add(c.id)
        continue
      }
      await runscKill(this.runsc, c.id)
      await runscDelete(this.runsc, c.id)
      removed.add(c.id)
    }
    // a start the dead process had begun (a pool restore, say) may not be listed yet and finish
    // later, owned by no one: its runsc processes go now, and any container they registered
    const strays = runscProcesses(this.runsc).filter((p) => p.container && !owned.has(p.container))
    killAll(strays.map((p) => p.pid))
    for (const c of new Set(strays.map((p) => p.container as string))) {
      await runscDelete(this.runsc, c)
      removed.add(c)
    }
    // a deleted container's processes take a moment to leave its cgroup
    const deadline = Date.now() + 5000
    for (const name of listCgroups(this.config.cgroupParent)) {
      if (owned.has(name)) continue
      const path = `${this.config.cgroupParent}/${name}`
      removeCgroup(path)
      while (cgroupExists(path) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50))
        removeCgroup(path)
      }
      removed.add(name)
    }
    for (const name of readdirSync(this.sandboxesDir)) {
      if (owned.has(name)) continue
      rmSync(join(this.sandboxesDir, name), { recursive: true, force: true })
      removed.add(name)
    }
    for (const name of await this.network.sweep()) removed.add(name)
    await this.network.prepare()
    // half-written rootfs builds and snapshots of processes that are gone
    for (const name of readdirSync(this.config.templatesDir)) {
      const owner = /\.(?:tmp|building)-(\d+)/.exec(name)?.[1]
      if (!owner || processAlive(Number(owner))) continue
      rmSync(join(this.config.templatesDir, name), { recursive: true, force: true })
      removed.add(name)
    }
    return [...removed]
  }

  async start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void> {
    const def = this.definition(spec.template)
    await this.ensureTemplate(spec.template)
    if (spec.snapshot) {
      const image = this.userSnapshot(spec.snapshot)
      if (!existsSync(image)) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${spec.snapshot} on this host`)
      await this.boot(def, spec, image, signal)
      return
    }
    const snapshot = this.snapshotOf(def)
    const standard = sameResources(spec.resources, def.resources.defaults)
    if (standard) {
      const claimed = await this.claim(def, spec)
      // a restore is CPU-bound: let the claimed sandbox's first requests go before refilling
      setTimeout(() => this.refill(def), REFILL_DELAY_MS).unref()
      if (claimed) return
    }
    if (standard && existsSync(snapshot)) {
      try {
        await this.boot(def, spec, snapshot, signal)
        return
      } catch (err) {
        if (signal?.aborted) throw err
        // A snapshot that will not restore is rebuilt on the next start; this one cold-boots.
        this.log(`restore of ${snapshot} failed, cold-booting instead: ${String(err)}`)
        rmSync(snapshot, { recursive: true, force: true })
        this.snapshotChecked.delete(def.name)
      }
    }
    await this.boot(def, spec, null, signal)
  }

  /** Takes a pooled sandbox for `spec`: configured with its envs, it becomes `spec.id`. */
  private async claim(def: TemplateDefinition, spec: StartSandboxSpec): Promise<boolean> {
    const pool = this.pools.get(def.name) ?? []
    for (let sbx = pool.shift(); sbx; sbx = pool.shift()) {
      if (sbx.stopping || sbx.conn.failed) continue
      this.sandboxes.delete(sbx.id)
      sbx.id = spec.id
      this.sandboxes.set(spec.id, sbx)
      try {
        await sbx.conn.configureRestored({ env: spec.envs })
        await this.setPolicy(sbx, spec.network ?? CLOSED)
        return true
      } catch {
        await this.stop(spec.id)
      }
    }
    return false
  }

  /** Tops the template's warm pool up to `poolSize`, one restore at a time, in the background. */
  private refill(def: TemplateDefinition): void {
    if (this.config.poolSize <= 0 || this.filling.has(def.name) || this.closing) return
    const snapshot = this.snapshotOf(def)
    if (!existsSync(snapshot)) return
    const pool = this.pools.get(def.name) ?? []
    this.pools.set(def.name, pool)
    const fill = (async () => {
      while (!this.closing && pool.length < this.config.poolSize && existsSync(snapshot)) {
        const id = `pool-${def.name}-${randomBytes(6).toString('hex')}`
        try {
          const sbx = await this.boot(
            def,
            { id, template: def.name, resources: def.resources.defaults, envs: {} },
            snapshot,
            undefined,
            { limitCpu: false },
          )
          await this.warmUp(def, id)
          limitCpu(sbx.cgroup, def.resources.defaults.vcpus)
          if (this.closing) await this.stop(id)
          else pool.push(sbx)
        } catch (err) {
          this.log(`warm pool for ${def.name}: restore failed: ${String(err)}`)
          return
        }
      }
    })().finally(() => this.filling.delete(def.name))
    this.filling.set(def.name, fill)
  }

  usage(): SandboxUsage[] {
    const out: SandboxUsage[] = []
    for (const sbx of this.sandboxes.values()) {
      if (sbx.stopping || INTERNAL_ID.test(sbx.id)) continue
      const u = readUsage(sbx.cgroup)
      const net = this.network.bytes(sbx.slot) ?? { rxBytes: 0, txBytes: 0 }
      if (u) out.push({ id: sbx.id, ...u, networkRxBytes: net.rxBytes, networkTxBytes: net.txBytes })
    }
    return out
  }

  private networkReady(): Promise<void> {
    if (!this.networkUp) {
      this.networkUp = this.network.init()
      this.networkUp.catch(() => {
        this.networkUp = null
      })
    }
    return this.networkUp
  }

  /** Puts a policy in force and records it in the bundle (a restarted agent re-applies it). */
  private async setPolicy(sbx: LiveSandbox, policy: NetworkPolicy): Promise<void> {
    await this.network.apply(sbx.slot, policy)
    const record: BundleRecord = { id: sbx.id, vcpus: sbx.vcpus, slot: sbx.slot.slot, network: policy }
    writeFileSync(join(sbx.dir, BUNDLE_RECORD), JSON.stringify(record))
  }

  async setNetwork(id: string, policy: NetworkPolicy): Promise<void> {
    await this.setPolicy(this.live(id), policy)
  }

  sandboxAddress(id: string): string {
    return this.live(id).slot.sandboxIp
  }

  /** Pooled (unclaimed) sandboxes per template. */
  poolSizes(): Record<string, number> {
    return Object.fromEntries([...this.pools].map(([name, pool]) => [name, pool.length]))
  }

  /** Starts the container: a cold boot, or a restore of `snapshot` when given. */
  private async boot(
    def: TemplateDefinition,
    spec: StartSandboxSpec,
    snapshot: string | null,
    signal?: AbortSignal,
    opts: { limitCpu: boolean } = { limitCpu: true },
  ): Promise<LiveSandbox> {
    // The id's previous container may still be tearing down (runsc delete takes ~1.3 s, e.g. a
    // wake right after a hibernate): then this one gets a container name of its own.
    const container = this.sandboxes.has(spec.id) ? `${spec.id}-${randomBytes(3).toString('hex')}` : spec.id
    const dir = join(this.sandboxesDir, container)
    const cgroup = `${this.config.cgroupParent}/${container}`
    await this.networkReady()
    const slot = await this.network.acquire()
    mkdirSync(join(dir, 'proc'), { recursive: true })
    createCgroup(cgroup, cgroupLimits(spec.resources))
    const config = buildSpec({
      rootfs: this.rootfsOf(def),
      guestDir: this.guestDir,
      kernelPreload: def.kernel?.preload,
      cgroupsPath: `/${cgroup}`,
      netnsPath: `/run/netns/${slot.netns}`,
      // one name for all: a restored sandbox keeps the name it was baked with
      hostname: 'sandbox',
      resources: spec.resources,
    })
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    const record: BundleRecord = { id: spec.id, vcpus: spec.resources.vcpus, slot: slot.slot, network: CLOSED }
    writeFileSync(join(dir, BUNDLE_RECORD), JSON.stringify(record))
    // runsc's own log goes to a file: a pipe nobody reads would stall it
    const logFd = openSync(join(dir, 'runsc.log'), 'a')
    const stdio = createGuestFifos(dir)
    let proc: ChildProcess
    try {
      const command = snapshot ? ['restore', `--image-path=${snapshot}`] : ['run']
      const start = startCommand(
        this.config.runscPath,
        [...runscGlobalArgs(this.runsc), ...command, `--bundle=${dir}`, container],
        join(dir, 'proc'),
      )
      // its own process group: a Ctrl-C meant for the host does not reach the sandbox
      proc = spawn(start.file, start.args, { stdio: [stdio.stdin, stdio.stdout, logFd], detached: true })
    } finally {
      for (const fd of [logFd, stdio.stdin, stdio.stdout]) closeSync(fd)
    }
    const pipes = openGuestPipes(dir)
    const sbx = this.register(spec.id, container, record.vcpus, slot, pipes, { resync: false }, proc)
    proc.on('error', (err) => sbx.conn.fail(new AppError('INTERNAL', `cannot start runsc: ${err.message}`)))
    const conn = sbx.conn
    const timer = setTimeout(
      () => conn.fail(new AppError('INTERNAL', 'sandbox did not become ready in time')),
      READY_TIMEOUT_MS,
    )
    const onAbort = () => conn.fail(new AppError('INTERNAL', 'sandbox start aborted'))
    signal?.addEventListener('abort', onAbort)
    try {
      // a restored guest said "ready" before it was checkpointed: it is ready when it answers
      // a user snapshot keeps the env it had; given envs are added on top
      if (snapshot) await conn.configureRestored({ env: spec.envs, merge: Boolean(spec.snapshot) })
      else {
        await conn.ready
        if (Object.keys(spec.envs).length > 0) await conn.call({ op: 'configure', env: spec.envs })
      }
      await this.setPolicy(sbx, spec.network ?? CLOSED)
      if (opts.limitCpu) limitCpu(cgroup, spec.resources.vcpus)
      return sbx
    } catch (err) {
      // what runsc said is the only clue to a failed start: keep it in our log
      const tail = readFileSync(join(dir, 'runsc.log'), 'utf8').trim().split('\n').slice(-15).join('\n  ')
      this.log(
        `${container} failed to start (${snapshot ? `restore of ${snapshot}` : 'boot'}): ${String(err)}\n  ${tail}`,
      )
      await this.stop(spec.id)
      throw err instanceof AppError ? err : new AppError('INTERNAL', `sandbox failed to start: ${String(err)}`)
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Registers a sandbox whose guest is reached through `pipes`. It is gone when its runsc process
   * exits (`proc`, when we started it) or, for one re-attached after a restart, when its stdout
   * FIFO has no writer left.
   */
  private register(
    id: string,
    container: string,
    vcpus: number,
    slot: Slot,
    pipes: GuestPipes,
    opts: { resync: boolean },
    proc?: ChildProcess,
  ): LiveSandbox {
    let exitedResolve!: () => void
    const sbx: LiveSandbox = {
      id,
      container,
      dir: join(this.sandboxesDir, container),
      cgroup: `${this.config.cgroupParent}/${container}`,
      vcpus,
      slot,
      proc: proc ?? null,
      conn: new GuestConnection(pipes.input, pipes.output, {
        resync: opts.resync,
        onProtocolError: (_err, detail) => this.onGuestBroken(sbx, detail),
        log: (m) => this.log(`${sbx.id}: ${m}`),
      }),
      pipes,
      stopping: false,
      exited: new Promise((r) => {
        exitedResolve = r
      }),
    }
    this.sandboxes.set(id, sbx)
    let gone = false
    const onGone = (code: number | null, sig: NodeJS.Signals | null) => {
      if (gone) return
      gone = true
      pipes.input.destroy()
      pipes.output.destroy()
      exitedResolve()
      this.onContainerExit(sbx, code, sig)
    }
    if (proc) proc.on('close', (code, sig) => onGone(code, sig))
    pipes.output.on('error', () => {})
    pipes.output.on('close', () => {
      if (!proc) onGone(null, null)
    })
    return sbx
  }

  /**
   * After a restart: takes back a container a previous agent process started (its guest is
   * reached again through the bundle's FIFOs). False when it cannot be re-attached.
   */
  private async reattach(container: string): Promise<boolean> {
    const dir = join(this.sandboxesDir, container)
    let record: BundleRecord
    try {
      record = JSON.parse(readFileSync(join(dir, BUNDLE_RECORD), 'utf8')) as BundleRecord
    } catch {
      return false
    }
    // pooled and baking sandboxes are cheaper to make again than to adopt
    if (!hasGuestFifos(dir) || INTERNAL_ID.test(record.id) || this.sandboxes.has(record.id)) return false
    let pipes: GuestPipes
    try {
      pipes = openGuestPipes(dir)
    } catch {
      return false
    }
    let slot: Slot
    try {
      slot = await this.network.adopt(record.slot, record.network)
    } catch (err) {
      this.log(`cannot take back the network of ${record.id}: ${String(err)}`)
      pipes.input.destroy()
      pipes.output.destroy()
      return false
    }
    const sbx = this.register(record.id, container, record.vcpus, slot, pipes, { resync: true })
    const timer = setTimeout(
      () => sbx.conn.fail(new AppError('INTERNAL', 'the guest did not answer the resync')),
      READY_TIMEOUT_MS / 3,
    )
    try {
      // the guest drops what the old agent left half-sent, then marks the stream with `resynced`
      await runscSignal(this.runsc, container, 'USR2')
      await sbx.conn.ready
      await sbx.conn.call({ op: 'ping' })
      return true
    } catch (err) {
      this.log(`cannot re-attach ${record.id}: ${String(err)}`)
      sbx.stopping = true
      pipes.input.destroy()
      pipes.output.destroy()
      this.sandboxes.delete(record.id)
      await this.network.release(slot)
      return false
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * The guest sent what the protocol does not allow (root in the sandbox controls it): the sandbox
   * is reported errored and stopped; every other sandbox carries on.
   */
  private onGuestBroken(sbx: LiveSandbox, detail: string): void {
    if (sbx.stopping) return
    const message = `the sandbox's guest daemon broke the protocol (${detail}); the sandbox was stopped`
    this.log(`${sbx.id}: ${message}`)
    this.report(sbx.id, 'guest_protocol_error', message)
    void this.halt(sbx)
  }

  private report(id: string, reason: SandboxErrorReason | null, message: string | null): void {
    for (const l of this.listeners) {
      try {
        l(id, reason, message)
      } catch (err) {
        this.log(`an exit listener failed for ${id}: ${String(err)}`)
      }
    }
  }

  private onContainerExit(sbx: LiveSandbox, code: number | null, sig: NodeJS.Signals | null): void {
    let reason: SandboxErrorReason | null = null
    let message: string | null = null
    if (!sbx.stopping) {
      reason = limitHit(sbx.cgroup) ?? 'guest_exited'
      message =
        reason === 'out_of_memory'
          ? 'the sandbox hit its memory limit and was stopped'
          : reason === 'pids_limit'
            ? 'the sandbox hit its process limit and was stopped'
            : `the sandbox stopped by itself (runsc exit ${code ?? sig})`
    }
    sbx.conn.fail(
      reason
        ? new AppError('SANDBOX_ERRORED', message ?? 'sandbox errored', { reason })
        : new AppError('SANDBOX_NOT_RUNNING', 'sandbox was stopped'),
    )
    this.report(sbx.id, reason, message)
    this.track(this.cleanup(sbx))
  }

  private track(p: Promise<void>): void {
    this.cleanups.add(p)
    p.finally(() => this.cleanups.delete(p))
  }

  private async cleanup(sbx: LiveSandbox): Promise<void> {
    await runscDelete(this.runsc, sbx.container)
    await this.network.release(sbx.slot)
    removeCgroup(sbx.cgroup)
    rmSync(sbx.dir, { recursive: true, force: true })
    // a newer container may run under the same sandbox id by now
    if (this.sandboxes.get(sbx.id) === sbx) this.sandboxes.delete(sbx.id)
  }

  private live(id: string): LiveSandbox {
    const sbx = this.sandboxes.get(id)
    if (!sbx || sbx.stopping) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${id} is not running`)
    return sbx
  }

  exec(id: string, req: GuestExecRequest, signal?: AbortSignal, stream?: StreamHandlers): Promise<GuestExecOutput> {
    const { conn } = this.live(id)
    const stdout: Buffer[] = []
    const stderr: Buffer[] = []
    // output that is waited on is buffered here: always under a cap, whatever the guest sends
    const cap = stream ? req.maxOutputBytes : bufferCap(req.maxOutputBytes)
    return new Promise((resolve, reject) => {
      let channel = 0
      const onAbort = () => conn.sendJson(channel, { op: 'signal', signal: 'SIGKILL' })
      const backstop = setTimeout(() => {
        conn.sendJson(channel, { op: 'signal', signal: 'SIGKILL' })
      }, req.timeoutMs + EXEC_GRACE_MS)
      // streamed output is handed on in order; each chunk is acked once its handler is done
      const delivery = new AckedDelivery(conn, () => channel)
      const onData = (type: DataFrameType, payload: Buffer) => {
        if (!stream) {
          ;(type === FrameType.stdout ? stdout : stderr).push(payload)
          return
        }
        const handler = type === FrameType.stdout ? stream.onStdout : stream.onStderr
        delivery.push(() => handler?.(payload), payload.length)
      }
      channel = conn.open(
        {
          op: 'exec',
          argv: req.argv,
          cmd: req.cmd,
          env: req.env,
          cwd: req.cwd,
          user: req.user,
          stdin: req.stdin !== undefined,
          timeoutMs: req.timeoutMs,
          maxOutputBytes: cap,
          window: stream ? STREAM_WINDOW : undefined,
        },
        {
          dataTypes: OUTPUT_TYPES,
          ...(stream ? { window: STREAM_WINDOW } : { maxBytesPerStream: cap + OUTPUT_SLACK_BYTES }),
          events: ['started'],
          terminal: GuestExit,
          onData,
          settle: async (err, msg) => {
            await delivery.done()
            clearTimeout(backstop)
            signal?.removeEventListener('abort', onAbort)
            if (err || !msg) return reject(err)
            resolve({
              exitCode: msg.exitCode,
              signal: msg.signal,
              timedOut: msg.timedOut,
              truncated: msg.truncated ?? false,
              durationMs: msg.durationMs,
              stdout: Buffer.concat(stdout),
              stderr: Buffer.concat(stderr),
            })
          },
        },
      )
      signal?.addEventListener('abort', onAbort)
      if (req.stdin !== undefined && channel) void this.sendStream(conn, FrameType.stdin, channel, [req.stdin])
    })
  }

  startProcess(id: string, req: GuestExecRequest): Promise<{ pid: number }> {
    const { conn } = this.live(id)
    return conn.call(
      {
        op: 'exec',
        background: true,
        argv: req.argv,
        cmd: req.cmd,
        env: req.env,
        cwd: req.cwd,
        user: req.user,
        timeoutMs: req.timeoutMs,
      },
      GuestProcessStarted,
    )
  }

  attachProcess(
    id: string,
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null> {
    const { conn } = this.live(id)
    return new Promise((resolve, reject) => {
      let channel = 0
      const delivery = new AckedDelivery(conn, () => channel)
      const then = (fn: () => void | Promise<void>, ackBytes: number) => delivery.push(fn, ackBytes)
      const onAbort = () => conn.sendJson(channel, { op: 'proc_detach' })
      channel = conn.open(
        { op: 'proc_attach', pid, offset: opts.offset ?? 0, output: opts.output ?? true, window: STREAM_WINDOW },
        {
          dataTypes: OUTPUT_TYPES,
          window: STREAM_WINDOW,
          events: ['attached', 'gap'],
          terminal: GuestAttachEnd,
          onData: (type, payload) =>
            then(() => (type === FrameType.stdout ? handlers.onStdout : handlers.onStderr)?.(payload), payload.length),
          onMessage: (msg) => {
            if (msg.type === 'gap') then(() => handlers.onGap?.(msg.bytes), 0)
          },
          settle: async (err, msg) => {
            signal?.removeEventListener('abort', onAbort)
            await delivery.done()
            if (err || !msg) return reject(err)
            if (msg.type === 'result') return resolve(null) // detached
            resolve({
              exitCode: msg.exitCode,
              signal: msg.signal,
              timedOut: msg.timedOut,
              durationMs: msg.durationMs,
              offset: msg.offset,
            })
          },
        },
      )
      if (signal?.aborted) onAbort()
      else signal?.addEventListener('abort', onAbort)
    })
  }

  openPty(id: string, spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>): PtySession {
    const { conn } = this.live(id)
    let channel = 0
    const delivery = new AckedDelivery(conn, () => channel)
    let started!: (pid: number) => void
    let failed!: (err: Error) => void
    const pid = new Promise<number>((resolve, reject) => {
      started = resolve
      failed = reject
    })
    pid.catch(() => {})
    const exited = new Promise<{ exitCode: number; signal: string | null }>((resolve, reject) => {
      channel = conn.open(
        {
          op: 'exec',
          pty: true,
          argv: spec.argv,
          cmd: spec.cmd,
          cols: spec.cols,
          rows: spec.rows,
          env: spec.env,
          cwd: spec.cwd,
          user: spec.user,
          timeoutMs: 0,
          window: STREAM_WINDOW,
        },
        {
          dataTypes: OUTPUT_TYPES,
          window: STREAM_WINDOW,
          events: ['started'],
          terminal: GuestExit,
          onMessage: (msg) => {
            if (msg.type === 'started') started(msg.pid)
          },
          onData: (_type, payload) => delivery.push(() => onData(payload), payload.length),
          settle: async (err, msg) => {
            await delivery.done()
            if (err || !msg) {
              failed(err ?? new AppError('GUEST_ERROR', 'terminal ended without an exit'))
              return reject(err)
            }
            resolve({ exitCode: msg.exitCode, signal: msg.signal })
          },
        },
      )
    })
    return {
      pid,
      exited,
      write: (data) => {
        if (data.length > 0) conn.send(FrameType.stdin, channel, data)
      },
      resize: (cols, rows) => conn.sendJson(channel, { op: 'resize', cols, rows }),
      kill: (signal = 'SIGKILL') => conn.sendJson(channel, { op: 'signal', signal }),
    }
  }

  processOp(id: string, op: GuestProcessOp): Promise<unknown> {
    const { conn } = this.live(id)
    if (op.op === 'proc_list') return conn.call({ ...op }, GuestProcessList)
    if (op.op === 'proc_stdin') return conn.call({ ...op }, GuestEmpty)
    return conn.call({ ...op }, ProcessInfo)
  }

  private async sendStream(
    conn: GuestConnection,
    type: typeof FrameType.stdin | typeof FrameType.file,
    channel: number,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    stop: () => boolean = () => false,
  ): Promise<void> {
    for await (const chunk of body) {
      if (stop()) break
      for (let off = 0; off < chunk.length; off += STDIN_CHUNK) {
        if (!conn.send(type, channel, chunk.subarray(off, off + STDIN_CHUNK))) await conn.drained()
      }
    }
    conn.send(type, channel)
  }

  readFile(
    id: string,
    path: string,
    user?: string,
  ): Promise<{ size: number | null; stream: ReadableStream<Uint8Array> }> {
    const { conn } = this.live(id)
    return new Promise((resolve, reject) => {
      let channel = 0
      // the guest reads ahead by one window; each chunk is acked once the consumer has pulled it
      const delivery = new AckedDelivery(conn, () => channel)
      const file = new FileReadStream(
        {
          push: (deliver, bytes) => delivery.push(deliver, bytes),
          abort: () => conn.sendJson(channel, { op: 'abort' }),
        },
        STREAM_WINDOW,
      )
      let opened = false
      channel = conn.open(
        { op: 'read', path, user, window: STREAM_WINDOW },
        {
          dataTypes: [FrameType.file],
          events: ['file'],
          window: STREAM_WINDOW,
          onMessage: (msg) => {
            if (msg.type !== 'file' || opened) return
            const { size } = msg
            opened = true
            file.open(size)
            resolve({ size, stream: file.stream })
          },
          onData: (_type, payload) => {
            if (opened) file.data(payload)
          },
          settle: (err) => {
            if (!opened) return reject(err ?? new AppError('GUEST_ERROR', 'read ended without a file'))
            file.end(err)
          },
        },
      )
    })
  }

  writeFile(
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    opts: { mode?: number; user?: string } = {},
  ): Promise<FileEntry> {
    const { conn } = this.live(id)
    return new Promise((resolve, reject) => {
      let settled = false
      const channel = conn.open(
        { op: 'write', path, mode: opts.mode, user: opts.user },
        {
          settle: (err, msg) => {
            settled = true
            if (err) reject(err)
            else resolve(msg?.value as FileEntry)
          },
        },
      )
      if (!channel) return
      // a refused write stops taking the body; a body that fails (the client went away) aborts
      // the guest side, which removes its temp file and leaves the target untouched
      this.sendStream(conn, FrameType.file, channel, body, () => settled).catch((err) => {
        conn.sendJson(channel, { op: 'abort' })
        reject(err)
      })
    })
  }

  fileOp(id: string, op: GuestFileOp): Promise<unknown> {
    return this.live(id).conn.call({ ...op })
  }

  runCode(
    id: string,
    req: GuestRunCodeRequest,
    handlers: RunCodeHandlers = {},
    signal?: AbortSignal,
  ): Promise<GuestRunCodeOutput> {
    const { conn } = this.live(id)
    // its output is collected by the caller: always under a cap, whatever the guest sends
    const cap = bufferCap(req.maxOutputBytes)
    let displayBytes = 0
    let displayDropped = false
    return new Promise((resolve, reject) => {
      let channel = 0
      const onAbort = () => conn.sendJson(channel, { op: 'interrupt' })
      channel = conn.open(
        {
          op: 'run_code',
          code: req.code,
          language: req.language,
          context: req.context,
          env: req.env,
          timeoutMs: req.timeoutMs,
          maxOutputBytes: cap,
          silent: req.silent,
        },
        {
          dataTypes: OUTPUT_TYPES,
          maxBytesPerStream: cap + OUTPUT_SLACK_BYTES,
          events: ['display'],
          terminal: GuestResult.extend({ value: GuestCellResult }),
          onData: (type, payload) => {
            if (type === FrameType.stdout) handlers.onStdout?.(payload)
            else handlers.onStderr?.(payload)
          },
          onMessage: (msg, bytes) => {
            if (msg.type !== 'display') return
            // the guest does not cap rich outputs: here they are
            displayBytes += bytes
            if (displayBytes > MAX_DISPLAY_BYTES) {
              displayDropped = true
              return
            }
            handlers.onResult?.({ isMainResult: msg.main, ...msg.data })
          },
          settle: (err, msg) => {
            signal?.removeEventListener('abort', onAbort)
            if (err || !msg) return reject(err)
            const v = msg.value
            resolve({
              executionCount: v.executionCount,
              error: v.error,
              timedOut: v.timedOut,
              truncated: v.truncated || displayDropped,
              durationMs: v.durationMs,
            })
          },
        },
      )
      signal?.addEventListener('abort', onAbort)
    })
  }

  codeContext(id: string, op: GuestContextOp): Promise<unknown> {
    const { conn } = this.live(id)
    if (op.op === 'context_list') return conn.call({ ...op }, GuestContextList)
    if (op.op === 'context_remove') return conn.call({ ...op }, GuestEmpty)
    return conn.call({ ...op }, CodeContext)
  }

  private get snapshotsDir(): string {
    return join(this.config.dataDir, 'snapshots')
  }

  private userSnapshot(snapshotId: string): string {
    if (!/^[A-Za-z0-9_-]+$/.test(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${snapshotId}`)
    return join(this.snapshotsDir, snapshotId)
  }

  snapshot(id: string, snapshotId: string): Promise<{ sizeBytes: number }> {
    // the sandbox pauses while its image is written, then carries on (stop-then-restore in runsc)
    return this.checkpointTo(this.live(id), this.userSnapshot(snapshotId), true)
  }

  /** Checkpoints `sbx` into `target` and waits for it to stop: an exit that is expected, not an error. */
  private async checkpointAndStop(sbx: LiveSandbox, target: string): Promise<{ sizeBytes: number }> {
    sbx.stopping = true
    try {
      const size = await this.checkpointTo(sbx, target, false)
      await sbx.exited
      return size
    } catch (err) {
      sbx.stopping = false
      limitCpu(sbx.cgroup, sbx.vcpus)
      throw err
    }
  }

  /**
   * Writes the image beside `target` and renames it there: a half-written one is never restored.
   * A target that appeared meanwhile (a content-addressed bake by another process) is kept.
   */
  private async checkpointTo(sbx: LiveSandbox, target: string, leaveRunning: boolean): Promise<{ sizeBytes: number }> {
    const tmp = `${target}.tmp-${process.pid}`
    mkdirSync(tmp, { recursive: true })
    limitCpu(sbx.cgroup, null)
    try {
      await runscCheckpoint(this.runsc, sbx.container, tmp, { leaveRunning })
      if (existsSync(target)) rmSync(tmp, { recursive: true, force: true })
      else renameSync(tmp, target)
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true })
      throw new AppError(
        'INTERNAL',
        `checkpoint of ${sbx.id} failed: ${err instanceof Error ? err.message : String(err)}`,
      )
    } finally {
      if (!sbx.stopping) limitCpu(sbx.cgroup, sbx.vcpus)
    }
    let sizeBytes = 0
    for (const f of readdirSync(target)) sizeBytes += statSync(join(target, f)).size
    return { sizeBytes }
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    rmSync(this.userSnapshot(snapshotId), { recursive: true, force: true })
  }

  async pruneSnapshots(keep: string[]): Promise<void> {
    const wanted = new Set(keep)
    mkdirSync(this.snapshotsDir, { recursive: true })
    for (const name of readdirSync(this.snapshotsDir)) {
      const owner = /\.tmp-(\d+)$/.exec(name)?.[1]
      if (owner ? !processAlive(Number(owner)) : !wanted.has(name))
        rmSync(join(this.snapshotsDir, name), { recursive: true, force: true })
    }
  }

  async stop(id: string): Promise<void> {
    const sbx = this.sandboxes.get(id)
    if (sbx) await this.halt(sbx)
  }

  private async halt(sbx: LiveSandbox): Promise<void> {
    if (sbx.stopping) return
    sbx.stopping = true
    sbx.pipes.input.destroy()
    // If the container never came up runsc may not know it, and a wedged one (seen once after an
    // OOM) may never answer `kill`: then its processes go by PID.
    const forced = setTimeout(() => {
      sbx.proc?.kill('SIGKILL')
      killAll(
        runscProcesses(this.runsc)
          .filter((p) => p.container === sbx.container)
          .map((p) => p.pid),
      )
    }, 5_000)
    sbx.exited.finally(() => clearTimeout(forced))
    await runscKill(this.runsc, sbx.container)
  }

  liveIds(): string[] {
    // pooled (also while being filled) and baking sandboxes are the agent's own until claimed
    return [...this.sandboxes.values()].filter((s) => !s.stopping && !INTERNAL_ID.test(s.id)).map((s) => s.id)
  }

  onExit(listener: SandboxExitListener): void {
    this.listeners.push(listener)
  }

  /** Stops every sandbox and waits for all teardown to finish. */
  async close(): Promise<void> {
    this.closing = true
    await Promise.all([...this.filling.values()])
    this.pools.clear()
    const all = [...this.sandboxes.values()]
    await Promise.all(all.map((s) => this.stop(s.id)))
    await Promise.all(all.map((s) => s.exited))
    while (this.cleanups.size > 0) await Promise.all([...this.cleanups])
    // runsc processes a crashed predecessor started (re-attached sandboxes) are not our children:
    // they end on their own once their containers are deleted
    const strays = await waitForRunscProcesses(this.runsc)
    // still working on our state dir with every sandbox gone: a stray; it goes too
    killAll(strays)
    if (strays.length > 0) {
      await waitForRunscProcesses(this.runsc)
      for (const name of listCgroups(this.config.cgroupParent)) removeCgroup(`${this.config.cgroupParent}/${name}`)
    }
    removeCgroup(this.config.cgroupParent)
    if (this.networkUp) await this.network.close()
  }
}
