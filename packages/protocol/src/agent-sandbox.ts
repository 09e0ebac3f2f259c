// The data plane of one running sandbox, as the control plane reaches it through an agent: one
// handle per sandbox (`AgentApi.sandbox(id)`), its methods the guest client's. A new guest
// operation is added here, in the guest client and in the service that uses it; nothing in
// between restates it (the remote side and the fleet are made from the method list below).
import type {
  GuestContextOp,
  GuestContextOps,
  GuestFileOp,
  GuestFileOps,
  GuestProcessOp,
  GuestProcessOps,
} from './guest-ops.ts'
import { methodCalls } from './method-calls.ts'
import type { CodeResult, ExecutionError, FileEntry, WatchEnd, WatchEvent } from './schemas.ts'

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

/** Receivers of streamed output; the agent asks the guest for more once a returned promise settles. */
export interface StreamHandlers {
  onStdout?(chunk: Uint8Array): void | Promise<void>
  onStderr?(chunk: Uint8Array): void | Promise<void>
  /** A background process's log dropped this many bytes before the caller read them. */
  onGap?(bytes: number): void | Promise<void>
}

export interface WriteOptions {
  mode?: number
  user?: string
  /** User metadata kept with the file (replacing what it had); checked by the caller (`FileMetadata`). */
  metadata?: Record<string, string>
}

/** Receivers of a directory watch; the agent lets the guest send more once a returned promise settles. */
export interface WatchHandlers {
  /** The watch is set up on `path` (absolute): what happens from here on is reported. */
  onStart?(path: string): void | Promise<void>
  onEvents(events: WatchEvent[]): void | Promise<void>
  /** Events were lost (the sandbox's kernel queue overflowed, or too many directories to follow). */
  onOverflow?(reason: string): void | Promise<void>
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

/** One running sandbox's calls, wherever it runs (see `AgentApi.sandbox`). */
export interface AgentSandbox {
  /** Runs a command to its end. With `stream`, output goes to the handlers as it comes (flow
   * controlled: the command waits while they do) and not into the result. */
  exec(req: GuestExecRequest, signal?: AbortSignal, stream?: StreamHandlers): Promise<GuestExecOutput>
  /** Starts a command that outlives the call; its output is kept in a bounded log. */
  startProcess(req: GuestExecRequest): Promise<{ pid: number }>
  /** Streams a background process's output from `offset`, then resolves with its exit (null if
   * `signal` detached first). */
  attachProcess(
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null>
  processOp<R extends GuestProcessOp>(req: R): Promise<GuestProcessOps[R['op']]['res']>
  /** Starts a program on a new terminal; its output (one stream) goes to `onData`, flow controlled. */
  openPty(spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>): Promise<PtySession>
  /** Resolves once the guest has opened the file; the stream then carries its bytes (pulled: the
   * guest reads ahead by a window only; cancelling it stops the guest's read). `size` is null when
   * the kernel does not know it (procfs, sysfs): such a file is cut off past 16 MiB. Only regular
   * files are read (else NOT_A_REGULAR_FILE). */
  readFile(path: string, user?: string): Promise<{ size: number | null; stream: ReadableStream<Uint8Array> }>
  writeFile(path: string, body: AsyncIterable<Uint8Array>, opts?: WriteOptions): Promise<FileEntry>
  fileOp<R extends GuestFileOp>(req: R): Promise<GuestFileOps[R['op']]['res']>
  /**
   * Watches a directory (with `recursive`, the directories under it too) as `user`: its changes go
   * to `handlers` as they come, flow controlled, until `signal` stops it or the directory goes.
   */
  watchDir(
    req: { path: string; recursive?: boolean; user?: string },
    handlers: WatchHandlers,
    signal?: AbortSignal,
  ): Promise<WatchEnd>
  /** Runs a cell in one of the sandbox's code contexts; output and results go to `handlers` as they come. */
  runCode(req: GuestRunCodeRequest, handlers?: RunCodeHandlers, signal?: AbortSignal): Promise<GuestRunCodeOutput>
  codeContext<R extends GuestContextOp>(req: R): Promise<GuestContextOps[R['op']]['res']>
}

/** The `AgentSandbox` methods, in the order the wire and the fleet carry them. */
export const agentSandboxMethods = [
  'exec',
  'startProcess',
  'attachProcess',
  'processOp',
  'openPty',
  'readFile',
  'writeFile',
  'fileOp',
  'watchDir',
  'runCode',
  'codeContext',
] as const satisfies readonly (keyof AgentSandbox)[]

export type AgentSandboxMethod = (typeof agentSandboxMethods)[number]

/** Fails to compile when `AgentSandbox` gains a method the list above does not carry. */
type Unlisted = Exclude<keyof AgentSandbox, AgentSandboxMethod>
export const agentSandboxMethodsComplete: [Unlisted] extends [never] ? true : never = true

/** An `AgentSandbox` whose every method is `call` of its name with its arguments (the remote agent, the fleet, the local agent). */
export function agentSandboxCalls(
  call: (method: AgentSandboxMethod, args: unknown[]) => Promise<unknown>,
): AgentSandbox {
  return methodCalls<AgentSandbox, AgentSandboxMethod>(agentSandboxMethods, call)
}
