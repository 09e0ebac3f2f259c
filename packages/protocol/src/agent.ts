// The contract between the control plane and a host agent: the server drives sandboxes only
// through this interface, so an HTTP client for a remote agent can stand in for the local one.
import type { SandboxErrorReason } from './errors.ts'
import type { CodeContext, CodeResult, ExecutionError, FileEntry, ResolvedResources, TemplateInfo } from './schemas.ts'

export interface StartSandboxSpec {
  id: string
  template: string
  resources: ResolvedResources
  envs: Record<string, string>
  /** Restore this snapshot (made by `AgentApi.snapshot`) instead of the template's. */
  snapshot?: string
  /** What it may reach (default: nothing). */
  network?: EgressPolicy
}

/** The part of a network policy the host enforces. */
export interface EgressPolicy {
  internet: boolean
  allowOut: string[]
  denyOut: string[]
}

export interface SandboxUsage {
  id: string
  cpuSeconds: number
  memoryBytes: number
  /** Bytes the sandbox received and sent on its network interface. */
  networkRxBytes: number
  networkTxBytes: number
}

export interface GuestExecRequest {
  argv?: string[]
  cmd?: string
  env?: Record<string, string>
  cwd?: string
  user?: string
  stdin?: Uint8Array
  timeoutMs: number
  maxOutputBytes: number
}

export interface GuestExecOutput {
  exitCode: number
  signal: string | null
  timedOut: boolean
  truncated: boolean
  durationMs: number
  stdout: Uint8Array
  stderr: Uint8Array
}

export interface GuestRunCodeRequest {
  code: string
  language: string
  context?: string
  env?: Record<string, string>
  timeoutMs: number
  maxOutputBytes: number
  /** A warm-up cell: no execution count, no history. */
  silent?: boolean
}

/** What a cell sends while it runs, in order. */
export interface RunCodeHandlers {
  onStdout?(chunk: Uint8Array): void
  onStderr?(chunk: Uint8Array): void
  onResult?(result: CodeResult): void
}

export interface GuestRunCodeOutput {
  executionCount: number | null
  error: ExecutionError | null
  timedOut: boolean
  truncated: boolean
  durationMs: number
}

export type GuestContextOp =
  | { op: 'context_create'; language: string; cwd?: string; env?: Record<string, string> }
  | { op: 'context_list' }
  | { op: 'context_restart'; context: string }
  | { op: 'context_remove'; context: string }

export type { CodeContext }

/** Receivers of streamed output; the agent asks the guest for more once a returned promise settles. */
export interface StreamHandlers {
  onStdout?(chunk: Uint8Array): void | Promise<void>
  onStderr?(chunk: Uint8Array): void | Promise<void>
  /** A background process's log dropped this many bytes before the caller read them. */
  onGap?(bytes: number): void | Promise<void>
}

export interface ProcessExit {
  exitCode: number
  signal: string | null
  timedOut: boolean
  durationMs: number
  /** Log offset after the last output byte. */
  offset: number
}

export interface PtySpec {
  /** Default: a login bash. */
  argv?: string[]
  cmd?: string
  cols: number
  rows: number
  env?: Record<string, string>
  cwd?: string
  user?: string
}

/** A program running on a terminal in the sandbox. */
export interface PtySession {
  /** Resolves once the program runs. */
  pid: Promise<number>
  /** Keystrokes (raw bytes, e.g. "\x03" for ^C). */
  write(data: Uint8Array): void
  resize(cols: number, rows: number): void
  kill(signal?: string): void
  /** How the program ended. */
  exited: Promise<{ exitCode: number; signal: string | null }>
}

export type GuestProcessOp =
  | { op: 'proc_list' }
  | { op: 'proc_stdin'; pid: number; data?: string; eof?: boolean }
  | { op: 'proc_signal'; pid: number; signal: string }

export type GuestFileOp =
  | { op: 'usage' }
  | { op: 'stat'; path: string; user?: string }
  | { op: 'list'; path: string; depth: number; user?: string }
  | { op: 'mkdir'; path: string; user?: string }
  | { op: 'remove'; path: string; recursive: boolean; user?: string }
  | { op: 'rename'; from: string; to: string; user?: string }

export interface TemplateProgress {
  template: string
  phase: string
  /** 0..1 when known */
  fraction?: number
  message?: string
}

export type SandboxExitListener = (id: string, reason: SandboxErrorReason | null, message: string | null) => void

export interface AgentApi {
  templates(): TemplateInfo[]
  /** Builds the template's rootfs if it is not in the cache yet. */
  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void>
  start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void>
  /** Runs a command to its end. With `stream`, output goes to the handlers as it comes (flow
   * controlled: the command waits while they do) and not into the result. */
  exec(id: string, req: GuestExecRequest, signal?: AbortSignal, stream?: StreamHandlers): Promise<GuestExecOutput>
  /** Starts a command that outlives the call; its output is kept in a bounded log. */
  startProcess(id: string, req: GuestExecRequest): Promise<{ pid: number }>
  /** Streams a background process's output from `offset`, then resolves with its exit (null if
   * `signal` detached first). */
  attachProcess(
    id: string,
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null>
  processOp(id: string, op: GuestProcessOp): Promise<unknown>
  /** Starts a program on a new terminal; its output (one stream) goes to `onData`, flow controlled. */
  openPty(id: string, spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>): PtySession
  /** Resolves once the guest has opened the file; the stream then carries its bytes (pulled: the
   * guest reads ahead by a window only; cancelling it stops the guest's read). `size` is null when
   * the kernel does not know it (procfs, sysfs): such a file is cut off past 16 MiB. Only regular
   * files are read (else NOT_A_REGULAR_FILE). */
  readFile(
    id: string,
    path: string,
    user?: string,
  ): Promise<{ size: number | null; stream: ReadableStream<Uint8Array> }>
  writeFile(
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    opts?: { mode?: number; user?: string },
  ): Promise<FileEntry>
  fileOp(id: string, op: GuestFileOp): Promise<unknown>
  /** Runs a cell in one of the sandbox's code contexts; output and results go to `handlers` as they come. */
  runCode(
    id: string,
    req: GuestRunCodeRequest,
    handlers?: RunCodeHandlers,
    signal?: AbortSignal,
  ): Promise<GuestRunCodeOutput>
  codeContext(id: string, op: GuestContextOp): Promise<unknown>
  /** Checkpoints a running sandbox (memory, processes and disk) into snapshot `snapshotId`; it keeps running. */
  snapshot(id: string, snapshotId: string): Promise<{ sizeBytes: number }>
  deleteSnapshot(snapshotId: string): Promise<void>
  /** Removes every stored snapshot not in `keep` (after a crash, what no record owns). */
  pruneSnapshots(keep: string[]): Promise<void>
  /** Stops the sandbox at once; the slow teardown continues in the background. */
  stop(id: string): Promise<void>
  /** CPU and memory of each running sandbox (from its cgroup). */
  usage(): SandboxUsage[]
  /** Replaces a running sandbox's egress policy; in force when this resolves (open flows it no longer allows are cut). */
  setNetwork(id: string, policy: EgressPolicy): Promise<void>
  /** The address the control plane reaches the sandbox's ports on. */
  sandboxAddress(id: string): string
  /** Restored, unclaimed sandboxes waiting in each template's pool. */
  poolSizes(): Record<string, number>
  /** Sandboxes running now, including those re-attached after a restart. */
  liveIds(): string[]
  onExit(listener: SandboxExitListener): void
  close(): Promise<void>
}
