// A stand-in for the agent at the control plane's edge: records calls, runs nothing.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import {
  type AgentApi,
  type AgentSandbox,
  AppError,
  agentSandboxCalls,
  type BuildLogLine,
  type EgressPolicy,
  type FileEntry,
  type ForkOptions,
  type ForkOutcome,
  type GuestContextOp,
  type GuestContextOps,
  type GuestExecOutput,
  type GuestExecRequest,
  type GuestFileOp,
  type GuestFileOps,
  type GuestProcessOp,
  type GuestProcessOps,
  type GuestRunCodeOutput,
  type GuestRunCodeRequest,
  type OpResults,
  type PortConnection,
  type ProcessExit,
  type PruneOptions,
  type PtySession,
  type RegistryAuth,
  type RunCodeHandlers,
  type SandboxExitListener,
  type SandboxUsage,
  type SnapshotOptions,
  type StartSandboxSpec,
  type StreamHandlers,
  type TemplateBuildResult,
  type TemplateBuildSpec,
  type TemplateInfo,
  type TemplatePruneResult,
  uploadOf,
  type WatchEnd,
  WatchEventType,
  type WatchHandlers,
} from '@forkbox/protocol'

const entry = (path: string): FileEntry => ({
  name: path.split('/').pop() ?? '',
  path,
  type: 'dir',
  size: 0,
  mode: 0o755,
  mtimeMs: 0,
  uid: 1000,
  gid: 1000,
})
const context = { id: 'ctx-1', language: 'python' as const, cwd: null, running: true }

export class FakeAgent implements AgentApi {
  started: StartSandboxSpec[] = []
  stopped: string[] = []
  live = new Set<string>()
  listeners: SandboxExitListener[] = []
  nextExec: Partial<GuestExecOutput> = {}

  /** User templates built or registered, by agent name. */
  userTemplates = new Map<string, TemplateBuildSpec>()
  /** The next build fails with this, after its first log line. */
  buildError: AppError | null = null
  /** Builds wait for this before they finish (a test holds a build open with it). */
  buildGate: Promise<void> = Promise.resolve()
  /** Every build as it came: its spec and its context tarball's bytes (the server removes the file after). */
  builds: { spec: TemplateBuildSpec; context: Buffer | null }[] = []

  /** Templates built on another host whose rootfs this one lacks (name → rootfs): their starts fail until it is pulled. */
  missingRootfs = new Map<string, string>()
  /** Every rootfs pull asked of this agent; a pull fails with `pullError` when it is set. */
  rootfsPulls: { rootfs: string; url: string }[] = []
  pullError: AppError | null = null

  private needsRootfs(template: string): void {
    const rootfs = this.missingRootfs.get(template)
    if (rootfs) throw new AppError('TEMPLATE_UNAVAILABLE', 'built on another host', { template, rootfs })
  }

  async pullRootfs(rootfs: string, from: { url: string }): Promise<void> {
    this.rootfsPulls.push({ rootfs, url: from.url })
    if (this.pullError) throw this.pullError
    for (const [name, r] of this.missingRootfs) if (r === rootfs) this.missingRootfs.delete(name)
  }

  /** How many times the templates were listed (a create's lookups). */
  templateLists = 0
  async templates(): Promise<TemplateInfo[]> {
    this.templateLists++
    const r = { vcpus: 1, memoryMB: 512, diskMB: 1024, pids: 1024 }
    const user = [...this.userTemplates.values()].map((t) => ({
      name: t.name,
      description: t.description,
      ...t.resources,
      ready: !this.missingRootfs.has(t.name),
    }))
    return [{ name: 'base', description: 'fake', defaults: r, maxima: { ...r, memoryMB: 2048 }, ready: true }, ...user]
  }
  async ensureTemplate(name: string): Promise<void> {
    this.needsRootfs(name)
  }
  /** The registry logins each build was given, in build order. */
  buildAuth: RegistryAuth[] = []
  async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    _signal?: AbortSignal,
    registryAuth: RegistryAuth = {},
    upload?: AsyncIterable<Uint8Array>,
  ): Promise<TemplateBuildResult> {
    this.buildAuth.push(registryAuth)
    const tar = uploadOf(spec)
    let context: Buffer | null = tar ? readFileSync(tar) : null
    if (upload) {
      const chunks: Uint8Array[] = []
      for await (const c of upload) chunks.push(c)
      context = Buffer.concat(chunks)
    }
    this.builds.push({ spec, context })
    onLog({ stream: 'system', message: `building ${spec.name}` })
    await this.buildGate
    const err = this.buildError
    this.buildError = null
    if (err) throw err
    onLog({ step: 1, stream: 'stdout', message: 'step output' })
    // a Dockerfile's build pins what it made, as the real agent's does (its image config)
    const { source } = spec
    const pinned: TemplateBuildSpec =
      source.kind === 'dockerfile'
        ? { ...spec, source: { ...source, built: { key: `fake-${spec.name}`, env: {}, exposedPorts: [] } } }
        : spec
    this.userTemplates.set(spec.name, pinned)
    return { pinned }
  }
  async registerTemplates(specs: TemplateBuildSpec[]): Promise<void> {
    for (const s of specs) this.userTemplates.set(s.name, s)
  }
  async removeTemplate(name: string): Promise<void> {
    this.userTemplates.delete(name)
  }
  /** The options of each prune asked for. */
  readonly prunes: PruneOptions[] = []
  async pruneTemplates(opts: PruneOptions = {}): Promise<TemplatePruneResult> {
    this.prunes.push(opts)
    return { removed: ['built-0123456789abcdef'], freedBytes: 4096 }
  }
  /** Starts fail once this many more have started. */
  failAfter = Number.POSITIVE_INFINITY
  async start(spec: StartSandboxSpec): Promise<void> {
    if (spec.snapshot && !this.snapshots.has(spec.snapshot)) throw new AppError('SNAPSHOT_NOT_FOUND', 'gone')
    this.needsRootfs(spec.template)
    if (this.failAfter-- <= 0) throw new AppError('INTERNAL', 'start failed')
    this.started.push(spec)
    this.live.add(spec.id)
  }
  /** What every sandbox's calls answer instead of the fake guest's (a test's stand-in for one call). */
  calls: Partial<AgentSandbox> = {}
  /** The fake guest of sandbox `id` (a subclass changes what its sandboxes answer with `guestOf`). */
  sandbox(id: string): AgentSandbox {
    return { ...bound(this.guestOf(id)), ...this.calls }
  }
  protected guestOf(id: string): AgentSandbox {
    return new FakeGuest(this, id)
  }
  snapshots = new Set<string>()
  /** The options of every snapshot asked for, in order. */
  snapshotOptions: (SnapshotOptions | undefined)[] = []
  async snapshot(id: string, snapshotId: string, opts?: SnapshotOptions): Promise<{ sizeBytes: number }> {
    if (!this.live.has(id)) throw new AppError('SANDBOX_NOT_RUNNING', 'not live')
    this.snapshots.add(snapshotId)
    this.snapshotOptions.push(opts)
    return { sizeBytes: 1234 }
  }
  /** Snapshots the source, then starts each child from it (so `failAfter` fails children too). */
  async fork(
    sourceId: string,
    children: Omit<StartSandboxSpec, 'snapshot'>[],
    opts: ForkOptions = {},
  ): Promise<ForkOutcome[]> {
    const snapshotId = `fork-${this.snapshots.size}-${Date.now()}`
    await this.snapshot(sourceId, snapshotId)
    try {
      await opts.onCheckpointed?.()
      return await Promise.all(
        children.map((c) =>
          this.start({ ...c, snapshot: snapshotId }).then(
            (): ForkOutcome => ({ id: c.id, error: null }),
            (err: Error): ForkOutcome => ({ id: c.id, error: err }),
          ),
        ),
      )
    } finally {
      await this.deleteSnapshot(snapshotId)
    }
  }
  async deleteSnapshot(snapshotId: string, opts: { stored?: boolean } = {}): Promise<void> {
    if (opts.stored) this.imageStore?.delete(snapshotId)
    this.snapshots.delete(snapshotId)
  }
  async pruneSnapshots(keep: string[]): Promise<void> {
    for (const s of [...this.snapshots]) if (!keep.includes(s)) this.snapshots.delete(s)
  }
  /** Sandboxes asked to freeze, in order (a live one always is). */
  frozen: string[] = []
  async freeze(id: string): Promise<boolean> {
    if (!this.live.has(id)) return false
    this.frozen.push(id)
    return true
  }
  async stop(id: string): Promise<void> {
    this.stopped.push(id)
    this.live.delete(id)
  }
  async usage(): Promise<SandboxUsage[]> {
    return [...this.live].map((id) => ({
      id,
      cpuSeconds: 1.5,
      memoryBytes: 64 * 1024 * 1024,
      networkRxBytes: 2048,
      networkTxBytes: 1024,
    }))
  }
  readonly networks = new Map<string, EgressPolicy>()
  async setNetwork(id: string, policy: EgressPolicy): Promise<void> {
    if (!this.live.has(id)) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${id} is not running`)
    this.networks.set(id, policy)
  }
  async sandboxAddress(_id: string): Promise<string> {
    return '127.0.0.1'
  }
  /** Images as bytes: a snapshot's is its id. */
  async exportSnapshot(snapshotId: string) {
    if (!this.snapshots.has(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', 'gone')
    const bytes = new TextEncoder().encode(snapshotId)
    return {
      sizeBytes: bytes.length,
      stream: new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(bytes)
          c.close()
        },
      }),
      sha256: Promise.resolve(createHash('sha256').update(bytes).digest('hex')),
    }
  }
  imports: string[] = []
  /** The shared image store this fake mounts (shared with other fakes), if any. */
  imageStore: Set<string> | null = null
  /** No peers to pull from (the fleet relays instead); from the image store when it has one. */
  async pullSnapshot(snapshotId: string, from: { url: string } | { store: true }): Promise<void> {
    if (!('store' in from)) throw new AppError('HOST_UNREACHABLE', 'the fake agent pulls from no peer')
    if (!this.imageStore?.has(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', 'not in the store')
    this.imports.push(snapshotId)
    this.snapshots.add(snapshotId)
  }
  async storeSnapshot(snapshotId: string): Promise<boolean> {
    if (!this.imageStore) return false
    if (!this.snapshots.has(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', 'gone')
    this.imageStore.add(snapshotId)
    return true
  }
  async importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>): Promise<void> {
    const h = createHash('sha256')
    for await (const c of body) h.update(c)
    if (h.digest('hex') !== (await sha256)) throw new AppError('INTERNAL', 'corrupted')
    this.imports.push(snapshotId)
    this.snapshots.add(snapshotId)
  }
  /** A real TCP connection to 127.0.0.1 (the fake's sandbox address). */
  async connectPort(
    _id: string,
    port: number,
    onData: (chunk: Uint8Array) => void | Promise<void>,
  ): Promise<PortConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port })
      socket.once('error', reject)
      socket.once('connect', () => {
        socket.off('error', reject)
        socket.on('error', () => {})
        const closed = new Promise<void>((done) => {
          socket.on('data', (c) => {
            socket.pause()
            Promise.resolve(onData(c)).then(
              () => socket.resume(),
              () => socket.destroy(),
            )
          })
          socket.once('close', () => done())
        })
        resolve({
          write: (c: Uint8Array) => new Promise<void>((ok) => socket.write(c, () => ok())),
          end: () => socket.end(),
          destroy: () => socket.destroy(),
          closed,
        })
      })
    })
  }
  async poolSizes(): Promise<Record<string, number>> {
    return { base: 2 }
  }
  async liveIds(): Promise<string[]> {
    return [...this.live]
  }
  onExit(l: SandboxExitListener): void {
    this.listeners.push(l)
  }
  /** Sandboxes a restarted agent found still running (re-attached). */
  adopt(id: string): void {
    this.live.add(id)
  }
  /** Simulates a sandbox dying by itself. */
  die(id: string, reason: 'out_of_memory' | 'pids_limit'): void {
    this.live.delete(id)
    for (const l of this.listeners) l(id, reason, `died: ${reason}`)
  }
  async close(): Promise<void> {}
}

/** A guest's methods as plain functions (so a test's `calls` can stand in for some). */
function bound(guest: AgentSandbox): AgentSandbox {
  return agentSandboxCalls((method, args) =>
    (guest[method] as (...a: unknown[]) => Promise<unknown>).apply(guest, args),
  )
}

/** One sandbox's calls as the fake answers them: echoes, empty lists, one background process (42). */
export class FakeGuest implements AgentSandbox {
  constructor(
    protected readonly agent: FakeAgent,
    readonly id: string,
  ) {}

  protected mustRun(): void {
    if (!this.agent.live.has(this.id)) throw new AppError('SANDBOX_NOT_RUNNING', 'not live')
  }

  async exec(req: GuestExecRequest, _signal?: AbortSignal, stream?: StreamHandlers): Promise<GuestExecOutput> {
    this.mustRun()
    if (stream) {
      await stream.onStdout?.(Buffer.from('ran '))
      await stream.onStdout?.(Buffer.from(`${req.argv?.join(' ') ?? req.cmd}`))
      await stream.onStderr?.(Buffer.from('err'))
    }
    return {
      exitCode: 0,
      signal: null,
      timedOut: false,
      truncated: false,
      durationMs: 1,
      stdout: Buffer.from(`ran ${req.argv?.join(' ') ?? req.cmd}`),
      stderr: Buffer.alloc(0),
      ...this.agent.nextExec,
    }
  }
  async readFile(): Promise<{ size: number; stream: ReadableStream<Uint8Array> }> {
    throw new AppError('FILE_NOT_FOUND', 'no file')
  }
  async writeFile(path: string, body: AsyncIterable<Uint8Array>): Promise<FileEntry> {
    let size = 0
    for await (const c of body) size += c.length
    return {
      name: path.split('/').pop() ?? '',
      path,
      type: 'file',
      size,
      mode: 0o644,
      mtimeMs: 0,
      uid: 1000,
      gid: 1000,
    }
  }
  /** Lists are empty; stat, mkdir and rename answer with a directory at the path. */
  async fileOp<R extends GuestFileOp>(req: R): Promise<GuestFileOps[R['op']]['res']> {
    const path = 'path' in req ? req.path : 'to' in req ? req.to : '/'
    const results: OpResults<GuestFileOps> = {
      usage: { usedBytes: 0 },
      stat: entry(path),
      list: [],
      mkdir: entry(path),
      remove: {},
      rename: entry(path),
    }
    return results[req.op]
  }
  /** Echoes the cell: its code to stdout in two chunks that split a multi-byte character, then as the main result. */
  async runCode(req: GuestRunCodeRequest, h: RunCodeHandlers = {}): Promise<GuestRunCodeOutput> {
    this.mustRun()
    const bytes = Buffer.from(`${req.code} é\n`)
    h.onStdout?.(bytes.subarray(0, bytes.length - 2))
    h.onStdout?.(bytes.subarray(bytes.length - 2))
    h.onStderr?.(Buffer.from('warn\n'))
    h.onResult?.({ isMainResult: true, text: req.code })
    return { executionCount: 1, error: null, timedOut: false, truncated: false, durationMs: 1 }
  }
  /** Streams `ran CMD` in two chunks when asked to stream. */
  async startProcess(_req: GuestExecRequest): Promise<{ pid: number }> {
    this.mustRun()
    return { pid: 42 }
  }
  /** Says it started, reports one event of each kind under the watched path, then waits to be stopped. */
  async watchDir(
    req: { path: string; recursive?: boolean; user?: string },
    h: WatchHandlers,
    signal?: AbortSignal,
  ): Promise<WatchEnd> {
    if (req.path.endsWith('/missing')) throw new AppError('FILE_NOT_FOUND', `no such file or directory: ${req.path}`)
    await h.onStart?.(req.path.startsWith('/') ? req.path : `/home/user/${req.path}`)
    await h.onEvents(WatchEventType.options.map((type) => ({ name: req.recursive ? 'sub/f.txt' : 'f.txt', type })))
    await new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve()
      signal?.addEventListener('abort', () => resolve())
    })
    return { reason: 'stopped' }
  }
  async attachProcess(pid: number, _opts: unknown, h: StreamHandlers): Promise<ProcessExit | null> {
    if (pid !== 42) throw new AppError('PROCESS_NOT_FOUND', 'no such process')
    await h.onStdout?.(Buffer.from('bg out\n'))
    return { exitCode: 0, signal: null, timedOut: false, durationMs: 1, offset: 7 }
  }
  async openPty(): Promise<PtySession> {
    throw new AppError('INTERNAL', 'no terminals in the fake agent')
  }
  /** No processes are listed; a signal answers for the one background process (42). */
  async processOp<R extends GuestProcessOp>(req: R): Promise<GuestProcessOps[R['op']]['res']> {
    const proc = { pid: 42, cmd: 'fake', running: false, exitCode: 0, signal: null, startedAt: 0, outputBytes: 7 }
    const results: OpResults<GuestProcessOps> = { proc_list: [], proc_stdin: {}, proc_signal: proc }
    return results[req.op]
  }
  /** No contexts are listed; create and restart answer with one python context. */
  async codeContext<R extends GuestContextOp>(req: R): Promise<GuestContextOps[R['op']]['res']> {
    const results: OpResults<GuestContextOps> = {
      context_create: context,
      context_list: [],
      context_restart: context,
      context_remove: {},
    }
    return results[req.op]
  }
}
