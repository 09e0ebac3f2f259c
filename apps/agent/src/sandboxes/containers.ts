// Container lifecycle: boots (or restores) a sandbox's runsc container, registers its guest,
// reports its exit, stops it and tracks its teardown until it is gone.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  AppError,
  type EgressPolicy,
  type ResolvedResources,
  type SandboxErrorReason,
  type SandboxExitListener,
  type SandboxUsage,
} from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { GuestClient } from '../guest/client.ts'
import { GuestConnection } from '../guest/connection.ts'
import { createGuestFifos, type GuestPipes, openGuestPipes } from '../guest/fifo.ts'
import type { InstalledGuest } from '../guest/install.ts'
import { CLOSED, type NetworkManager, type Slot } from '../network/manager.ts'
import {
  createCgroup,
  limitCpu,
  limitHit,
  listCgroups,
  readUsage,
  removeCgroup,
  setFrozen,
} from '../runtime/cgroups.ts'
import { type BuildMounts, buildSpec, cgroupLimits, type ImageDefaults } from '../runtime/oci-spec.ts'
import {
  killAll,
  type RunscOptions,
  runscDelete,
  runscGlobalArgs,
  runscKill,
  runscProcesses,
  startCommand,
  waitForRunscProcesses,
} from '../runtime/runsc.ts'
import type { KernelSettings } from '../templates/definition.ts'
import { BUNDLE_RECORD, type BundleRecord, INTERNAL_ID, type LiveSandbox, READY_TIMEOUT_MS } from './live-sandbox.ts'
import { WATCHDOG_DEFAULTS, Watchdog } from './watchdog.ts'

/** What a sandbox is started as. */
export interface BootSpec {
  id: string
  resources: ResolvedResources
  envs: Record<string, string>
  network?: EgressPolicy
  /** The template's rootfs, read-only under the sandbox. */
  rootfs: string
  /** The template's code kernel settings. */
  kernel?: KernelSettings
  /** Restore this checkpoint image instead of a cold boot. */
  image: string | null
  /** The image is a user snapshot: the env it had is kept, `envs` go on top. */
  userSnapshot?: boolean
  /** Default true; the pool leaves a restoring sandbox unthrottled and limits it once warm. */
  limitCpu?: boolean
  /** A template build step: `rootfs` is a host overlay the sandbox writes through (see `BuildMounts`). */
  build?: BuildMounts
  /** A user's image: its defaults and its own dirs (see `ImageDefaults`). */
  imageDefaults?: ImageDefaults
  /** Default true: RLIMIT_AS = the memory limit for the guest's processes (see the template definition). */
  limitAddressSpace?: boolean
}

export class Containers {
  private readonly sandboxes = new Map<string, LiveSandbox>()
  private readonly listeners: SandboxExitListener[] = []
  private readonly cleanups = new Set<Promise<void>>()
  private networkUp: Promise<void> | null = null
  /** CPU use of each sandbox when `freezeIfQuiet` last looked. */
  private readonly cpuSeen = new Map<string, { cpuSeconds: number; at: number }>()
  private readonly watchdog: Watchdog

  constructor(
    private readonly config: AgentConfig,
    readonly runsc: RunscOptions,
    readonly network: NetworkManager,
    private readonly guest: Pick<InstalledGuest, 'dir' | 'runtimeDir'>,
    private readonly log: (message: string) => void,
  ) {
    this.watchdog = new Watchdog(
      () => this.sandboxes.values(),
      (sbx, message) => this.errorAndStop(sbx, 'guest_unresponsive', `${message}; the sandbox was stopped`),
      (sbx, message) => this.errorAndStop(sbx, 'out_of_memory', message),
      log,
      { ...WATCHDOG_DEFAULTS, ...config.watchdog },
    )
    this.watchdog.start()
  }

  get sandboxesDir(): string {
    return join(this.config.dataDir, 'sandboxes')
  }

  /** The running sandbox `id` (else SANDBOX_NOT_RUNNING), thawed if it was frozen: whatever is done with it next runs. */
  live(id: string): LiveSandbox {
    const sbx = this.sandboxes.get(id)
    if (!sbx || sbx.stopping) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${id} is not running`)
    this.thaw(sbx)
    return sbx
  }

  /** Thaws a frozen sandbox (a write to its freezer cgroup: well under a millisecond). */
  thaw(sbx: LiveSandbox): void {
    if (!sbx.frozen) return
    sbx.frozen = false
    setFrozen(sbx.cgroup, false)
  }

  /**
   * Freezes `sbx` when it is quiet: no guest request or stream open, and at most `maxCpuPercent`
   * of a core used since the last look (the first look only takes the measure). True when frozen.
   */
  freezeIfQuiet(sbx: LiveSandbox, maxCpuPercent: number): boolean {
    if (sbx.frozen) return true
    if (sbx.stopping || sbx.conn.openChannels > 0) {
      this.cpuSeen.delete(sbx.id)
      return false
    }
    const usage = readUsage(sbx.cgroup)
    if (!usage) return false
    const now = performance.now()
    const before = this.cpuSeen.get(sbx.id)
    this.cpuSeen.set(sbx.id, { cpuSeconds: usage.cpuSeconds, at: now })
    if (!before || now - before.at < 1000) return false
    const percent = ((usage.cpuSeconds - before.cpuSeconds) / ((now - before.at) / 1000)) * 100
    if (percent > maxCpuPercent) return false
    if (!setFrozen(sbx.cgroup, true)) return false
    sbx.frozen = true
    this.cpuSeen.delete(sbx.id)
    return true
  }

  /** The running sandbox `id` as it is (frozen or not), or undefined. */
  peek(id: string): LiveSandbox | undefined {
    const sbx = this.sandboxes.get(id)
    return sbx && !sbx.stopping ? sbx : undefined
  }

  has(id: string): boolean {
    return this.sandboxes.has(id)
  }

  /** Every container's name, stopping ones included. */
  containerNames(): Set<string> {
    return new Set([...this.sandboxes.values()].map((s) => s.container))
  }

  /** A pooled sandbox claimed for a create: from now on it is `id`. */
  rename(sbx: LiveSandbox, id: string): void {
    // runsc cannot rename a container: the pool's names stay (usage and the metrics map them)
    this.sandboxes.delete(sbx.id)
    sbx.id = id
    this.sandboxes.set(id, sbx)
  }

  /** Forgets a sandbox that was never taken into service (a failed re-attach). */
  forget(sbx: LiveSandbox): void {
    if (this.sandboxes.get(sbx.id) === sbx) this.sandboxes.delete(sbx.id)
  }

  networkReady(): Promise<void> {
    if (!this.networkUp) {
      this.networkUp = this.network.init()
      this.networkUp.catch(() => {
        this.networkUp = null
      })
    }
    return this.networkUp
  }

  /** Puts an egress policy in force and records it in the bundle (a restarted agent re-applies it). */
  async setPolicy(sbx: LiveSandbox, policy: EgressPolicy): Promise<void> {
    await this.network.apply(sbx.slot, policy)
    const record: BundleRecord = { id: sbx.id, vcpus: sbx.vcpus, slot: sbx.slot.slot, network: policy }
    writeFileSync(join(sbx.dir, BUNDLE_RECORD), JSON.stringify(record))
  }

  /** Starts the container: a cold boot, or a restore of `spec.image` when given. */
  async boot(spec: BootSpec, signal?: AbortSignal): Promise<LiveSandbox> {
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
      rootfs: spec.rootfs,
      guestDir: this.guest.dir,
      runtimeDir: this.guest.runtimeDir,
      kernel: spec.kernel,
      cgroupsPath: `/${cgroup}`,
      netnsPath: `/run/netns/${slot.netns}`,
      // one name for all: a restored sandbox keeps the name it was baked with
      hostname: 'sandbox',
      resources: spec.resources,
      build: spec.build,
      image: spec.imageDefaults,
      limitAddressSpace: spec.limitAddressSpace,
    })
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    const record: BundleRecord = { id: spec.id, vcpus: spec.resources.vcpus, slot: slot.slot, network: CLOSED }
    writeFileSync(join(dir, BUNDLE_RECORD), JSON.stringify(record))
    // runsc's own log goes to a file: a pipe nobody reads would stall it
    const logFd = openSync(join(dir, 'runsc.log'), 'a')
    const stdio = createGuestFifos(dir)
    let proc: ChildProcess
    try {
      const command = spec.image ? ['restore', `--image-path=${spec.image}`] : ['run']
      const start = startCommand(
        this.config.runscPath,
        [...runscGlobalArgs(this.runsc, spec.build ? 'none' : 'memory'), ...command, `--bundle=${dir}`, container],
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
      // each sandbox its own name, machine id and boot id, whatever snapshot it came from
      if (spec.image)
        await conn.configureRestored({ env: spec.envs, merge: Boolean(spec.userSnapshot), hostname: spec.id })
      else {
        await conn.ready
        await conn.call({ op: 'configure', env: spec.envs, hostname: spec.id })
      }
      await this.setPolicy(sbx, spec.network ?? CLOSED)
      if (spec.limitCpu ?? true) limitCpu(cgroup, spec.resources.vcpus)
      sbx.starting = false
      return sbx
    } catch (err) {
      // what runsc said is the only clue to a failed start: keep it in our log
      const tail = readFileSync(join(dir, 'runsc.log'), 'utf8').trim().split('\n').slice(-15).join('\n  ')
      this.log(
        `${container} failed to start (${spec.image ? `restore of ${spec.image}` : 'boot'}): ${String(err)}\n  ${tail}`,
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
  register(
    id: string,
    container: string,
    vcpus: number,
    slot: Slot,
    pipes: GuestPipes,
    opts: { resync: boolean },
    proc?: ChildProcess,
  ): LiveSandbox {
    let exitedResolve!: () => void
    const conn = new GuestConnection(pipes.input, pipes.output, {
      resync: opts.resync,
      onProtocolError: (_err, detail) => this.onGuestBroken(sbx, detail),
      onDeadline: () => this.watchdog.check(sbx),
      log: (m) => this.log(`${sbx.id}: ${m}`),
    })
    const sbx: LiveSandbox = {
      id,
      container,
      dir: join(this.sandboxesDir, container),
      cgroup: `${this.config.cgroupParent}/${container}`,
      vcpus,
      slot,
      proc: proc ?? null,
      conn,
      guest: new GuestClient(conn),
      pipes,
      stopping: false,
      starting: !opts.resync,
      frozen: false,
      checkpointing: 0,
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
   * The sandbox cannot go on (processes the host's OOM killer left wedged past ending, a guest
   * that stopped answering): its calls fail with `reason`, it is reported errored, and stopped.
   */
  private errorAndStop(sbx: LiveSandbox, reason: SandboxErrorReason, message: string): void {
    if (sbx.stopping) return
    this.log(`${sbx.id}: ${message}`)
    sbx.conn.fail(new AppError('SANDBOX_ERRORED', message, { reason }))
    this.report(sbx.id, reason, message)
    void this.halt(sbx)
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

  onExit(listener: SandboxExitListener): void {
    this.listeners.push(listener)
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
    if (!sbx.starting) this.report(sbx.id, reason, message)
    this.track(this.cleanup(sbx))
  }

  private track(p: Promise<void>): void {
    this.cleanups.add(p)
    void p.finally(() => this.cleanups.delete(p))
  }

  private async cleanup(sbx: LiveSandbox): Promise<void> {
    await runscDelete(this.runsc, sbx.container)
    await this.network.release(sbx.slot)
    removeCgroup(sbx.cgroup)
    rmSync(sbx.dir, { recursive: true, force: true })
    // a newer container may run under the same sandbox id by now
    if (this.sandboxes.get(sbx.id) === sbx) this.sandboxes.delete(sbx.id)
  }

  async stop(id: string): Promise<void> {
    const sbx = this.sandboxes.get(id)
    if (sbx) await this.halt(sbx)
  }

  /** Stops the sandbox and waits until its container, cgroup, network slot and bundle are gone. */
  async stopAndWait(sbx: LiveSandbox): Promise<void> {
    await this.halt(sbx)
    await sbx.exited
    while (this.sandboxes.get(sbx.id) === sbx && this.cleanups.size > 0) await Promise.all([...this.cleanups])
  }

  private async halt(sbx: LiveSandbox): Promise<void> {
    if (sbx.stopping) return
    // frozen processes take no signal, SIGKILL included, until thawed
    this.thaw(sbx)
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
    void sbx.exited.finally(() => clearTimeout(forced))
    await runscKill(this.runsc, sbx.container)
  }

  /** Sandboxes running for the control plane: pooled (also while being filled) and baking ones are the agent's own. */
  liveIds(): string[] {
    return [...this.sandboxes.values()].filter((s) => !s.stopping && !INTERNAL_ID.test(s.id)).map((s) => s.id)
  }

  usage(): SandboxUsage[] {
    const out: SandboxUsage[] = []
    for (const sbx of this.sandboxes.values()) {
      if (sbx.stopping || INTERNAL_ID.test(sbx.id)) continue
      const u = readUsage(sbx.cgroup)
      const net = this.network.bytes(sbx.slot) ?? { rxBytes: 0, txBytes: 0 }
      if (u)
        out.push({
          id: sbx.id,
          ...u,
          networkRxBytes: net.rxBytes,
          networkTxBytes: net.txBytes,
          frozen: sbx.frozen,
          container: sbx.container,
          cgroup: sbx.cgroup,
        })
    }
    return out
  }

  /** Stops every sandbox and waits for all teardown to finish. */
  async close(): Promise<void> {
    this.watchdog.stop()
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
