// The `Sandbox` handle: create/connect/list/kill plus exec, files and TTL on one sandbox.
import './polyfill-dispose.ts'
import type {
  ExecRequest,
  ExecResult,
  NetworkOptions,
  Resources,
  Sandbox as SandboxInfo,
  SandboxState,
  Snapshot as SnapshotInfo,
} from '@forkbox/protocol'
import { CodeContexts, type Execution, type RunCodeOptions, runCode } from './code.ts'
import { fromBase64, toBase64, toBytes, toText } from './encoding.ts'
import { ForkboxError, NotFoundError } from './errors.ts'
import { type EventsOptions, type SandboxEvent, streamEvents } from './events.ts'
import { Files } from './files.ts'
import { type ConnectionOptions, connectionOptions, HttpClient, pathOf, type RequestOptions } from './http.ts'
import { type OutputCallbacks, type ProcessEvent, Processes, ProcessHandle, processEvents } from './processes.ts'
import { Pty } from './pty.ts'

export type { NetworkOptions, SandboxInfo, SnapshotInfo }

export interface CreateSandboxOptions extends ConnectionOptions, RequestOptions {
  /** Template name; the server's default is `base`. */
  template?: string
  /** Lifetime from now; the server's default is 300. */
  ttlSeconds?: number
  metadata?: Record<string, string>
  /** Environment variables for every command in the sandbox. */
  envs?: Record<string, string>
  resources?: Resources
  /** Start from this snapshot, by id or name (see `sandbox.snapshot()`): its template, resources and state. */
  snapshot?: string
  /** Exempt from the server's idle reaper, which otherwise hibernates a sandbox no call has
   * touched for its idle timeout (default 10 minutes). The TTL still applies. */
  persistent?: boolean
  /**
   * What its TTL does: `'kill'` (the default) ends it; `'hibernate'` checkpoints it (memory and
   * disk) and stops it, and the next call on it wakes it, with its TTL from the start again (E2B's
   * auto-pause). A hibernated sandbox is kept for 7 days. `'hibernate-disk'` keeps only its disk:
   * its processes end and its template's start command starts again, so it wakes as if booted
   * (E2B's `keepMemory: false`).
   */
  onTimeout?: 'kill' | 'hibernate' | 'hibernate-disk'
  /**
   * Default true: frozen while idle (no CPU until the next call thaws it). `false` for workloads
   * whose timers inside must keep time while no call comes (a cron job, a poller).
   */
  freeze?: boolean
  /**
   * What it may reach and which ports it exposes. Default: no network at all. `{ internet: true }`
   * opens the internet (never the host, private ranges, link-local/metadata addresses, other
   * sandboxes or mining ports); `allowOut` narrows it to those CIDRs and names, `denyOut` takes
   * some away. `ports` are served at `getHost(port)`.
   */
  network?: NetworkOptions
}

export interface ForkOptions extends RequestOptions {
  /** How many forks (1-16, default 1). */
  count?: number
  /** Lifetime of each fork from now; the server's default is 300. */
  ttlSeconds?: number
  /** Metadata of the forks; default: the original's. */
  metadata?: Record<string, string>
  /** On a fleet: place the forks across hosts (least loaded first) rather than beside the original. */
  spread?: boolean
}

export interface ConnectSandboxOptions extends ConnectionOptions, RequestOptions {}

export interface ListSandboxesOptions extends ConnectionOptions, RequestOptions {
  /** Only sandboxes whose metadata has all of these pairs. */
  metadata?: Record<string, string>
  state?: SandboxState
}

export interface KillSandboxOptions extends ConnectionOptions, RequestOptions {}

export interface ExecOptions extends RequestOptions {
  /** The server kills the command after this long (default 60; none for a background command):
   * `exec` then throws a `TimeoutError` (code `EXEC_TIMEOUT`) whose `details` hold the result so
   * far; a streamed or background command ends with `timedOut: true`, `exitCode: 137`. */
  timeoutSeconds?: number
  env?: Record<string, string>
  cwd?: string
  user?: string
  stdin?: string | Uint8Array
  /** Cap on stdout and on stderr each; beyond it output is dropped and `truncated: true`. */
  maxOutputBytes?: number
}

export interface ExecOutput<T = string> {
  exitCode: number
  stdout: T
  stderr: T
  /** The signal that ended the command, e.g. `SIGKILL`. */
  signal: string | null
  timedOut: boolean
  truncated: boolean
  durationMs: number
}

export type ExecBytesOutput = ExecOutput<Uint8Array>

export interface SandboxMetrics {
  /** Cumulative CPU seconds and memory in use, sampled every 5 s while running. */
  samples: { at: string; cpuSeconds: number; memoryBytes: number; networkRxBytes: number; networkTxBytes: number }[]
  /** Bytes used in /work, /home and /tmp (null unless running). */
  diskBytes: number | null
  diskLimitBytes: number
}

export class Sandbox {
  readonly id: string
  readonly files: Files
  /** Code contexts: interpreters with their own variables, cwd and env (`runCode({ context })`). */
  readonly contexts: CodeContexts
  /** Background processes: `exec(cmd, { background: true })` starts one. */
  readonly processes: Processes
  /** Terminals: `pty.create({ cols, rows, onData })`. */
  readonly pty: Pty
  readonly #http: HttpClient
  #info: SandboxInfo

  private constructor(http: HttpClient, info: SandboxInfo) {
    this.#http = http
    this.#info = info
    this.id = info.id
    this.files = new Files(http, info.id)
    this.contexts = new CodeContexts(http, info.id)
    this.processes = new Processes(http, info.id)
    this.pty = new Pty(http, info.id)
  }

  /** The sandbox as last fetched; refresh with `getInfo()`. */
  get info(): SandboxInfo {
    return this.#info
  }

  static async create(options: CreateSandboxOptions = {}): Promise<Sandbox> {
    const http = new HttpClient(connectionOptions(options))
    const { template, ttlSeconds, metadata, envs, resources, snapshot, persistent, network, onTimeout, freeze } =
      options
    const info = await http.json<SandboxInfo>({
      method: 'POST',
      path: '/v1/sandboxes',
      json: { template, ttlSeconds, metadata, envs, resources, snapshot, persistent, network, onTimeout, freeze },
      signal: options.signal,
    })
    return new Sandbox(http, info)
  }

  /** A handle on an existing sandbox; fails with NotFoundError when it does not exist. */
  static async connect(id: string, options: ConnectSandboxOptions = {}): Promise<Sandbox> {
    const http = new HttpClient(connectionOptions(options))
    const info = await http.json<SandboxInfo>({ method: 'GET', path: sandboxPath(id), signal: options.signal })
    return new Sandbox(http, info)
  }

  static async list(options: ListSandboxesOptions = {}): Promise<SandboxInfo[]> {
    const http = new HttpClient(connectionOptions(options))
    const query: Record<string, string | undefined> = { state: options.state }
    for (const [key, value] of Object.entries(options.metadata ?? {})) query[`metadata.${key}`] = value
    const res = await http.json<{ sandboxes: SandboxInfo[] }>({
      method: 'GET',
      path: '/v1/sandboxes',
      query,
      signal: options.signal,
    })
    return res.sandboxes
  }

  /** Kills a sandbox by id; a no-op on one that has already ended. */
  static async kill(id: string, options: KillSandboxOptions = {}): Promise<void> {
    const http = new HttpClient(connectionOptions(options))
    await http.empty({ method: 'DELETE', path: sandboxPath(id), signal: options.signal })
  }

  async getInfo(options: RequestOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.#http.json<SandboxInfo>({
      method: 'GET',
      path: sandboxPath(this.id),
      signal: options.signal,
    })
    return this.#info
  }

  /**
   * Runs a command and waits for it: a string runs under `/bin/bash -c`, an array is exec'd
   * directly. A non-zero exit is a result, not an error. Output is decoded as UTF-8.
   * With `onStdout` / `onStderr` the output also streams to them as it is written.
   * With `background: true` it returns at once with a handle on the running process.
   */
  exec(cmd: string | string[], options: ExecOptions & { background: true }): Promise<ProcessHandle>
  exec(cmd: string | string[], options?: ExecOptions & OutputCallbacks & { background?: false }): Promise<ExecOutput>
  async exec(
    cmd: string | string[],
    options: ExecOptions & OutputCallbacks & { background?: boolean } = {},
  ): Promise<ExecOutput | ProcessHandle> {
    if (options.background) {
      const { pid } = await this.#http.json<{ pid: number }>({
        method: 'POST',
        path: `${sandboxPath(this.id)}/exec`,
        json: { ...this.#execBody(cmd, options, 'utf8'), background: true },
        signal: options.signal,
      })
      return new ProcessHandle(this.#http, this.id, pid)
    }
    if (options.onStdout || options.onStderr) {
      const out = { stdout: '', stderr: '' }
      const cap = options.maxOutputBytes ?? Number.POSITIVE_INFINITY
      let truncated = false
      for await (const e of this.execStream(cmd, options)) {
        if (e.type === 'stdout' || e.type === 'stderr') {
          ;(e.type === 'stdout' ? options.onStdout : options.onStderr)?.(e.data)
          if (out[e.type].length + e.data.length <= cap) out[e.type] += e.data
          else truncated = true
        } else if (e.type === 'exit') {
          return {
            ...out,
            exitCode: e.exitCode,
            signal: e.signal,
            timedOut: e.timedOut,
            truncated,
            durationMs: e.durationMs,
          }
        }
      }
      throw new ForkboxError('UNEXPECTED_RESPONSE', 'the exec stream ended before the command did')
    }
    const result = await this.#exec(cmd, options, 'utf8')
    return outputOf(result, (s) => (result.encoding === 'base64' ? toText(fromBase64(s)) : s))
  }

  /**
   * Runs a command and yields its output as it is written, then its `exit`. The command only
   * runs as fast as the loop reads (flow control); breaking out of the loop kills it.
   */
  async *execStream(cmd: string | string[], options: ExecOptions = {}): AsyncGenerator<ProcessEvent> {
    const res = await this.#http.send({
      method: 'POST',
      path: `${sandboxPath(this.id)}/exec`,
      json: this.#execBody(cmd, options, 'utf8'),
      accept: 'text/event-stream',
      signal: options.signal,
    })
    try {
      yield* processEvents(res)
    } finally {
      await res.body?.cancel().catch(() => {})
    }
  }

  /** Like `exec`, but stdout and stderr are the raw bytes. */
  async execBytes(cmd: string | string[], options: ExecOptions = {}): Promise<ExecBytesOutput> {
    const result = await this.#exec(cmd, options, 'base64')
    return outputOf(result, (s) => (result.encoding === 'base64' ? fromBase64(s) : toBytes(s)))
  }

  async #exec(cmd: string | string[], options: ExecOptions, encoding: 'utf8' | 'base64'): Promise<ExecResult> {
    return this.#http.json<ExecResult>({
      method: 'POST',
      path: `${sandboxPath(this.id)}/exec`,
      json: this.#execBody(cmd, options, encoding),
      signal: options.signal,
    })
  }

  #execBody(cmd: string | string[], options: ExecOptions, encoding: 'utf8' | 'base64'): ExecRequest {
    const { stdin } = options
    const body: ExecRequest = {
      cmd,
      env: options.env,
      cwd: options.cwd,
      user: options.user,
      timeoutSeconds: options.timeoutSeconds,
      maxOutputBytes: options.maxOutputBytes,
      encoding,
    }
    if (typeof stdin === 'string') {
      body.stdin = stdin
    } else if (stdin !== undefined) {
      body.stdin = toBase64(stdin)
      body.stdinEncoding = 'base64'
    }
    return body
  }

  /**
   * Runs a cell in a persistent interpreter: variables, imports and open files carry over to the
   * next cell. An exception in the cell is `execution.error`, not a thrown error. With `onStdout`,
   * `onStderr` or `onResult` the output streams as it happens.
   *
   * ```ts
   * const e = await sbx.runCode('import pandas as pd; pd.DataFrame({"a": [1, 2]}).describe()')
   * e.text // the describe() table as text; e.results[0].html as html
   * ```
   */
  runCode(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    return runCode(this.#http, this.id, code, options)
  }

  /** Shorthand for `contexts.create()`. */
  createCodeContext(options: Parameters<CodeContexts['create']>[0] = {}) {
    return this.contexts.create(options)
  }

  /**
   * Keeps this sandbox's live state (memory, processes, disk) as a snapshot; start new sandboxes
   * from it with `Sandbox.create({ snapshot: id })`. The sandbox pauses while it is written.
   * `name`: start from it by that name too (`snapshot: name`); the name moves to it from the
   * snapshot of this key that had it.
   */
  async snapshot(options: RequestOptions & { name?: string } = {}): Promise<SnapshotInfo> {
    return this.#http.json<SnapshotInfo>({
      method: 'POST',
      path: `${sandboxPath(this.id)}/snapshots`,
      ...(options.name ? { json: { name: options.name } } : {}),
      signal: options.signal,
    })
  }

  /**
   * `count` (default 1) new, independent sandboxes that start from this one's exact live state:
   * variables in running processes, files, background processes. This sandbox carries on.
   */
  async fork(options: ForkOptions = {}): Promise<Sandbox[]> {
    const { count, ttlSeconds, metadata, spread } = options
    const res = await this.#http.json<{ sandboxes: SandboxInfo[] }>({
      method: 'POST',
      path: `${sandboxPath(this.id)}/fork`,
      json: { count, ttlSeconds, metadata, spread },
      signal: options.signal,
    })
    return res.sandboxes.map((info) => new Sandbox(this.#http, info))
  }

  /**
   * Checkpoints the sandbox and stops it, holding no memory; its state (memory, processes, disk)
   * comes back on the next call that needs it (exec, files, snapshot, fork), which wakes it.
   * With `keepMemory: false` only its disk is kept (a smaller image): its processes end and its
   * template's start command starts again, so it wakes as if booted, its files as they were.
   */
  async hibernate(options: RequestOptions & { keepMemory?: boolean } = {}): Promise<SandboxInfo> {
    this.#info = await this.#http.json<SandboxInfo>({
      method: 'POST',
      path: `${sandboxPath(this.id)}/hibernate`,
      ...(options.keepMemory === false ? { json: { keepMemory: false } } : {}),
      signal: options.signal,
    })
    return this.#info
  }

  /** CPU and memory over the last 10 minutes (a sample per 5 s) and disk use now. */
  getMetrics(options: RequestOptions = {}): Promise<SandboxMetrics> {
    return this.#http.json<SandboxMetrics>({
      method: 'GET',
      path: `${sandboxPath(this.id)}/metrics`,
      signal: options.signal,
    })
  }

  /** This sandbox's lifecycle events: past ones, then live ones as they happen. */
  events(options: Omit<EventsOptions, 'sandboxId'> = {}): AsyncGenerator<SandboxEvent> {
    return streamEvents(this.#http, { ...options, sandboxId: this.id })
  }

  /** Sets the sandbox to expire `ttlSeconds` from now. */
  async setTimeout(ttlSeconds: number, options: RequestOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.#http.json<SandboxInfo>({
      method: 'POST',
      path: `${sandboxPath(this.id)}/timeout`,
      json: { ttlSeconds },
      signal: options.signal,
    })
    return this.#info
  }

  /**
   * Changes what the sandbox may reach or which ports it exposes; fields not given keep their
   * value. In force when this resolves: open connections the new policy refuses are cut.
   */
  async updateNetwork(network: NetworkOptions, options: RequestOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.#http.json<SandboxInfo>({
      method: 'PATCH',
      path: `${sandboxPath(this.id)}/network`,
      json: network,
      signal: options.signal,
    })
    return this.#info
  }

  /**
   * Where port `port` of the sandbox is served (`PORT-ID.DOMAIN[:apiPort]`, its own browser
   * origin): `http://${getHost(p)}/...` answers with the owner's API key or the sandbox's
   * `accessToken` (header `X-Forkbox-Access-Token`, or `?forkbox_token=` once from a browser).
   * The port must be in `network.ports`.
   */
  getHost(port: number): string {
    const base = new URL(this.#http.url)
    return `${port}-${this.id}.${this.#info.domain}${base.port ? `:${base.port}` : ''}`
  }

  /** Opens the sandbox's exposed ports to whoever holds it, instead of an API key. */
  get accessToken(): string {
    return this.#info.accessToken
  }

  async kill(options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'DELETE', path: sandboxPath(this.id), signal: options.signal })
  }

  /** Kills the sandbox at the end of an `await using` block. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.kill()
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err
    }
  }
}

function sandboxPath(id: string): string {
  return pathOf('v1', 'sandboxes', id)
}

function outputOf<T>(result: ExecResult, decode: (s: string) => T): ExecOutput<T> {
  return {
    exitCode: result.exitCode,
    stdout: decode(result.stdout),
    stderr: decode(result.stderr),
    signal: result.signal,
    timedOut: result.timedOut,
    truncated: result.truncated,
    durationMs: result.durationMs,
  }
}
