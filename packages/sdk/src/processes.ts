// Streaming commands and background processes: output as it is written, stdin, signals, and
// re-attaching to a process from another client.
import type { ProcessInfo } from '@forkbox/protocol'
import { toBase64 } from './encoding.ts'
import { ForkboxError } from './errors.ts'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'
import { eventError, serverSentEvents } from './sse.ts'

export type { ProcessInfo }

export interface OutputCallbacks {
  /** Each piece of stdout as the command writes it (UTF-8 text). */
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
}

/** One event of a streamed command or process. */
export type ProcessEvent =
  | { type: 'stdout' | 'stderr'; data: string }
  | { type: 'gap'; bytes: number }
  | { type: 'exit'; exitCode: number; signal: string | null; timedOut: boolean; durationMs: number }

export interface ProcessExitResult {
  exitCode: number
  signal: string | null
  timedOut: boolean
  durationMs: number
}

/** Parses a streamed response into events, ending with `exit` (an `error` event throws). */
export async function* processEvents(res: Response): AsyncGenerator<ProcessEvent> {
  for await (const { event, payload } of serverSentEvents(res)) {
    const p = payload as Record<string, unknown>
    if (event === 'stdout' || event === 'stderr') yield { type: event, data: String(p.data) }
    else if (event === 'gap') yield { type: 'gap', bytes: Number(p.bytes) }
    else if (event === 'exit') {
      yield {
        type: 'exit',
        exitCode: Number(p.exitCode),
        signal: (p.signal as string | null) ?? null,
        timedOut: Boolean(p.timedOut),
        durationMs: Number(p.durationMs),
      }
      return
    } else if (event === 'error') throw eventError(payload, res)
  }
}

/**
 * A command running in the background: it outlives the request that started it and any client
 * watching it. Output is kept in a bounded log (4 MiB) that any client can read from the start.
 */
export class ProcessHandle {
  readonly pid: number
  readonly #http: HttpClient
  readonly #path: string

  constructor(http: HttpClient, sandboxId: string, pid: number) {
    this.#http = http
    this.pid = pid
    this.#path = `${pathOf('v1', 'sandboxes', sandboxId)}/processes/${pid}`
  }

  /** Output events from log offset `offset` (0: the oldest kept) until the process exits. Breaking
   * out of the loop (or aborting `signal`) detaches; the process runs on. */
  async *output(options: RequestOptions & { offset?: number } = {}): AsyncGenerator<ProcessEvent> {
    const res = await this.#http.send({
      method: 'GET',
      path: `${this.#path}/output`,
      query: { offset: options.offset },
      accept: 'text/event-stream',
      signal: options.signal,
    })
    try {
      yield* processEvents(res)
    } finally {
      await res.body?.cancel().catch(() => {})
    }
  }

  /**
   * Waits for the process to exit. With callbacks, its output (from the start of the log) goes to
   * them meanwhile.
   */
  async wait(options: RequestOptions & OutputCallbacks = {}): Promise<ProcessExitResult> {
    if (!options.onStdout && !options.onStderr) {
      return this.#http.json<ProcessExitResult>({ method: 'GET', path: `${this.#path}/wait`, signal: options.signal })
    }
    for await (const e of this.output(options)) {
      if (e.type === 'stdout') options.onStdout?.(e.data)
      else if (e.type === 'stderr') options.onStderr?.(e.data)
      else if (e.type === 'exit') return e
    }
    throw new ForkboxError('UNEXPECTED_RESPONSE', `the output stream of process ${this.pid} ended before it did`)
  }

  async sendStdin(data: string | Uint8Array, options: RequestOptions = {}): Promise<void> {
    const base64 = typeof data !== 'string'
    await this.#http.empty({
      method: 'POST',
      path: `${this.#path}/stdin`,
      json: { data: typeof data === 'string' ? data : toBase64(data), encoding: base64 ? 'base64' : 'utf8' },
      signal: options.signal,
    })
  }

  async closeStdin(options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'POST', path: `${this.#path}/stdin`, json: { eof: true }, signal: options.signal })
  }

  /** Signals the process and its process group (default SIGKILL). */
  kill(signal = 'SIGKILL', options: RequestOptions = {}): Promise<ProcessInfo> {
    return this.#http.json<ProcessInfo>({
      method: 'POST',
      path: `${this.#path}/signal`,
      json: { signal },
      signal: options.signal,
    })
  }
}

export class Processes {
  readonly #http: HttpClient
  readonly #sandboxId: string

  constructor(http: HttpClient, sandboxId: string) {
    this.#http = http
    this.#sandboxId = sandboxId
  }

  /** Background processes, running and recently ended. */
  async list(options: RequestOptions = {}): Promise<ProcessInfo[]> {
    const res = await this.#http.json<{ processes: ProcessInfo[] }>({
      method: 'GET',
      path: `${pathOf('v1', 'sandboxes', this.#sandboxId)}/processes`,
      signal: options.signal,
    })
    return res.processes
  }

  /** A handle on a background process started by this or any other client. */
  connect(pid: number): ProcessHandle {
    return new ProcessHandle(this.#http, this.#sandboxId, pid)
  }
}
