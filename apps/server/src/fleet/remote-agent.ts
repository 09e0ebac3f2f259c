// The control plane's side of a host agent on another machine: the `AgentApi` over one
// WebSocket, opened on first use and again after it drops.
import type {
  AgentApi,
  BuildLogLine,
  EgressPolicy,
  FileEntry,
  ForkOptions,
  ForkOutcome,
  GuestContextOp,
  GuestContextOps,
  GuestExecOutput,
  GuestExecRequest,
  GuestFileOp,
  GuestFileOps,
  GuestProcessOp,
  GuestProcessOps,
  GuestRunCodeOutput,
  GuestRunCodeRequest,
  ImageSource,
  PortConnection,
  ProcessExit,
  PruneOptions,
  PtySession,
  PtySpec,
  RegistryAuth,
  RunCodeHandlers,
  SandboxErrorReason,
  SandboxExitListener,
  SandboxUsage,
  SnapshotOptions,
  SnapshotResult,
  StartSandboxSpec,
  StreamHandlers,
  TemplateBuildResult,
  TemplateBuildSpec,
  TemplateInfo,
  TemplateProgress,
  TemplatePruneResult,
  WatchEnd,
  WatchHandlers,
  WriteOptions,
} from '@forkbox/protocol'
import { AppError, RpcPeer } from '@forkbox/protocol'
import { type RawData, WebSocket } from 'ws'

/** Where the agent serves calls (its `AGENT_RPC_PATH`), under its base URL (which may have a path). */
const RPC_PATH = 'v1/agent/rpc'
const PING_INTERVAL_MS = 5_000
const CONNECT_TIMEOUT_MS = 5_000

export interface RemoteAgentOptions {
  /** The agent's base URL (`http://10.0.0.5:7412`). */
  url: string
  /** The secret the agent accepts calls with (changes when it joins again). */
  credential: () => Promise<string>
  /** What it is called in errors and logs. */
  name: string
  onDisconnect?: (err: Error) => void
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data)
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data
}

export class RemoteAgent implements AgentApi {
  private peer: Promise<RpcPeer> | null = null
  private socket: WebSocket | null = null
  private readonly exitListeners: SandboxExitListener[] = []
  private closed = false

  constructor(private readonly opts: RemoteAgentOptions) {}

  private unreachable(why: string): AppError {
    return new AppError('HOST_UNREACHABLE', `host ${this.opts.name} is unreachable: ${why}`, { host: this.opts.name })
  }

  private connect(): Promise<RpcPeer> {
    if (this.closed) return Promise.reject(this.unreachable('the client is closed'))
    if (this.peer) return this.peer
    const opening = this.open()
    this.peer = opening
    opening.catch(() => {
      if (this.peer === opening) this.peer = null
    })
    return opening
  }

  private async open(): Promise<RpcPeer> {
    const credential = await this.opts.credential()
    const base = this.opts.url.endsWith('/') ? this.opts.url : `${this.opts.url}/`
    const ws = new WebSocket(new URL(RPC_PATH, base), {
      headers: { authorization: `Bearer ${credential}` },
      handshakeTimeout: CONNECT_TIMEOUT_MS,
      maxPayload: 64 * 1024 * 1024,
      perMessageDeflate: false,
    })
    const peer = new RpcPeer({ send: (frame) => ws.send(frame) }, {}, (name, args) => this.event(name, args))
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('unexpected-response', (_req, res) => reject(this.unreachable(`it answered ${res.statusCode}`)))
      ws.once('error', (err) => reject(this.unreachable(err.message)))
    })
    this.socket = ws
    let alive = true
    const ping = setInterval(() => {
      if (!alive) return ws.terminate()
      alive = false
      ws.ping()
    }, PING_INTERVAL_MS)
    ping.unref()
    ws.on('pong', () => {
      alive = true
    })
    ws.on('message', (data) => {
      try {
        peer.receive(bytesOf(data))
      } catch {
        ws.close(1002, 'protocol error')
      }
    })
    ws.on('error', () => {})
    ws.once('close', () => {
      clearInterval(ping)
      const err = this.unreachable('the connection dropped')
      peer.close(err)
      if (this.socket === ws) {
        this.socket = null
        this.peer = null
      }
      if (!this.closed) this.opts.onDisconnect?.(err)
    })
    return peer
  }

  private event(name: string, args: unknown[]): void {
    if (name !== 'exit') return
    const [id, reason, message] = args
    if (typeof id !== 'string') return
    for (const l of this.exitListeners)
      l(
        id,
        (typeof reason === 'string' ? reason : null) as SandboxErrorReason | null,
        typeof message === 'string' ? message : null,
      )
  }

  private async call<T>(method: string, ...args: unknown[]): Promise<T> {
    const peer = await this.connect()
    return (await peer.call(method, args)) as T
  }

  templates() {
    return this.call<TemplateInfo[]>('templates')
  }
  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void) {
    return this.call<void>('ensureTemplate', name, onProgress)
  }
  buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
    upload?: AsyncIterable<Uint8Array>,
  ) {
    return this.call<TemplateBuildResult>('buildTemplate', spec, onLog, signal, registryAuth, upload)
  }
  registerTemplates(specs: TemplateBuildSpec[]) {
    return this.call<void>('registerTemplates', specs)
  }
  removeTemplate(name: string) {
    return this.call<void>('removeTemplate', name)
  }
  pruneTemplates(opts?: PruneOptions) {
    return this.call<TemplatePruneResult>('pruneTemplates', opts)
  }
  start(spec: StartSandboxSpec, signal?: AbortSignal) {
    return this.call<void>('start', spec, signal)
  }
  exec(id: string, req: GuestExecRequest, signal?: AbortSignal, stream?: StreamHandlers) {
    return this.call<GuestExecOutput>('exec', id, req, signal, stream)
  }
  startProcess(id: string, req: GuestExecRequest) {
    return this.call<{ pid: number }>('startProcess', id, req)
  }
  attachProcess(
    id: string,
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ) {
    return this.call<ProcessExit | null>('attachProcess', id, pid, opts, handlers, signal)
  }
  watchDir(
    id: string,
    req: { path: string; recursive?: boolean; user?: string },
    handlers: WatchHandlers,
    signal?: AbortSignal,
  ) {
    return this.call<WatchEnd>('watchDir', id, req, handlers, signal)
  }
  processOp<R extends GuestProcessOp>(id: string, req: R) {
    return this.call<GuestProcessOps[R['op']]['res']>('processOp', id, req)
  }
  openPty(id: string, spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>) {
    return this.call<PtySession>('openPty', id, spec, onData)
  }
  readFile(id: string, path: string, user?: string) {
    return this.call<{ size: number | null; stream: ReadableStream<Uint8Array> }>('readFile', id, path, user)
  }
  writeFile(id: string, path: string, body: AsyncIterable<Uint8Array>, opts?: WriteOptions) {
    return this.call<FileEntry>('writeFile', id, path, body, opts)
  }
  fileOp<R extends GuestFileOp>(id: string, req: R) {
    return this.call<GuestFileOps[R['op']]['res']>('fileOp', id, req)
  }
  runCode(id: string, req: GuestRunCodeRequest, handlers?: RunCodeHandlers, signal?: AbortSignal) {
    return this.call<GuestRunCodeOutput>('runCode', id, req, handlers, signal)
  }
  codeContext<R extends GuestContextOp>(id: string, req: R) {
    return this.call<GuestContextOps[R['op']]['res']>('codeContext', id, req)
  }
  snapshot(id: string, snapshotId: string, opts?: SnapshotOptions) {
    return this.call<SnapshotResult>('snapshot', id, snapshotId, opts)
  }
  fork(sourceId: string, children: Omit<StartSandboxSpec, 'snapshot'>[], opts?: ForkOptions) {
    return this.call<ForkOutcome[]>('fork', sourceId, children, opts)
  }
  exportSnapshot(snapshotId: string) {
    return this.call<{ sizeBytes: number; stream: ReadableStream<Uint8Array>; sha256: Promise<string> }>(
      'exportSnapshot',
      snapshotId,
    )
  }
  importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>) {
    return this.call<void>('importSnapshot', snapshotId, body, sha256)
  }
  pullSnapshot(snapshotId: string, from: ImageSource) {
    return this.call<void>('pullSnapshot', snapshotId, from)
  }
  pullRootfs(rootfs: string, from: { url: string; sha256: string | null }) {
    return this.call<void>('pullRootfs', rootfs, from)
  }
  storeSnapshot(snapshotId: string) {
    return this.call<boolean>('storeSnapshot', snapshotId)
  }
  deleteSnapshot(snapshotId: string, opts?: { stored?: boolean }) {
    return this.call<void>('deleteSnapshot', snapshotId, opts)
  }
  pruneSnapshots(keep: string[]) {
    return this.call<void>('pruneSnapshots', keep)
  }
  freeze(id: string) {
    return this.call<boolean>('freeze', id)
  }
  stop(id: string) {
    return this.call<void>('stop', id)
  }
  usage() {
    return this.call<SandboxUsage[]>('usage')
  }
  setNetwork(id: string, policy: EgressPolicy) {
    return this.call<void>('setNetwork', id, policy)
  }
  sandboxAddress(id: string) {
    return this.call<string>('sandboxAddress', id)
  }
  connectPort(id: string, port: number, onData: (chunk: Uint8Array) => void | Promise<void>) {
    return this.call<PortConnection>('connectPort', id, port, onData)
  }
  poolSizes() {
    return this.call<Record<string, number>>('poolSizes')
  }
  liveIds() {
    return this.call<string[]>('liveIds')
  }
  onExit(listener: SandboxExitListener): void {
    this.exitListeners.push(listener)
  }
  async close(): Promise<void> {
    this.closed = true
    this.socket?.close(1000, 'closing')
    this.socket = null
    this.peer = null
  }
}
