// Commands: run and wait (JSON), run and stream (flow controlled), or start in the background and
// attach to its output, stdin and signals later, from any client.
import {
  AppError,
  DEFAULT_EXEC_TIMEOUT_SECONDS,
  DEFAULT_MAX_OUTPUT_BYTES,
  type ExecRequest,
  type ExecResult,
  type GuestExecRequest,
  type GuestProcessOps,
  type ProcessExit,
  type ProcessInfo,
  type PtySession,
  type PtySpec,
  type StreamHandlers,
} from '@forkbox/protocol'
import type { z } from 'zod'
import type { Metrics } from '../metrics.ts'
import type { ServedBy } from './guest-ops-served.ts'
import type { SandboxCalls } from './sandbox-calls.ts'
import type { SandboxEvents } from './sandbox-events.ts'

type ExecInput = z.output<typeof ExecRequest>
export type Encoding = 'utf8' | 'base64'

/** Where streamed output goes; a returned promise holds the command back until it settles. */
export interface OutputSink {
  stdout(data: string): Promise<void> | void
  stderr(data: string): Promise<void> | void
  gap?(bytes: number): Promise<void> | void
}

function guestRequest(req: ExecInput, timeoutSeconds: number, maxOutputBytes: number): GuestExecRequest {
  const argv = Array.isArray(req.cmd) ? req.cmd : undefined
  return {
    argv,
    cmd: argv ? undefined : (req.cmd as string),
    env: req.env,
    cwd: req.cwd,
    user: req.user,
    stdin:
      req.stdin === undefined ? undefined : Buffer.from(req.stdin, req.stdinEncoding === 'base64' ? 'base64' : 'utf8'),
    timeoutMs: Math.round(timeoutSeconds * 1000),
    maxOutputBytes,
  }
}

/** Turns byte chunks into text (UTF-8 characters split across chunks kept whole) or base64. */
function encoder(encoding: Encoding) {
  const decoder = new TextDecoder('utf-8')
  return (chunk: Uint8Array) =>
    encoding === 'base64' ? Buffer.from(chunk).toString('base64') : decoder.decode(chunk, { stream: true })
}

function toHandlers(sink: OutputSink, encoding: Encoding): StreamHandlers {
  const out = encoder(encoding)
  const err = encoder(encoding)
  return {
    onStdout: (c) => sink.stdout(out(c)),
    onStderr: (c) => sink.stderr(err(c)),
    onGap: (n) => sink.gap?.(n),
  }
}

export interface ExecServiceOptions {
  calls: SandboxCalls
  events: SandboxEvents
  metrics?: Metrics
}

export class ExecService {
  private readonly calls: SandboxCalls
  private readonly events: SandboxEvents
  private readonly metrics?: Metrics

  constructor(o: ExecServiceOptions) {
    this.calls = o.calls
    this.events = o.events
    this.metrics = o.metrics
  }

  /** exec-started / exec-ended events around `run`. */
  private async recorded<T extends { exitCode: number }>(
    id: string,
    req: ExecInput,
    run: () => Promise<T>,
  ): Promise<T> {
    const cmd = Array.isArray(req.cmd) ? req.cmd.join(' ') : req.cmd
    await this.events.record(id, 'exec-started', cmd.slice(0, 200))
    const started = performance.now()
    const out = await run()
    this.metrics?.execSeconds.observe({ kind: 'exec' }, (performance.now() - started) / 1000)
    await this.events.record(id, 'exec-ended', `exit ${out.exitCode}`)
    return out
  }

  async exec(owner: string, id: string, req: ExecInput, signal?: AbortSignal): Promise<ExecResult> {
    const timeout = req.timeoutSeconds ?? DEFAULT_EXEC_TIMEOUT_SECONDS
    const out = await this.calls.onSandbox(owner, id, (sbx) =>
      this.recorded(id, req, () =>
        sbx.exec(guestRequest(req, timeout, req.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES), signal),
      ),
    )
    const enc = req.encoding === 'base64' ? 'base64' : 'utf8'
    const result: ExecResult = {
      exitCode: out.exitCode,
      signal: out.signal,
      stdout: Buffer.from(out.stdout).toString(enc),
      stderr: Buffer.from(out.stderr).toString(enc),
      encoding: req.encoding,
      timedOut: out.timedOut,
      truncated: out.truncated,
      durationMs: out.durationMs,
    }
    if (out.timedOut)
      throw new AppError('EXEC_TIMEOUT', `command did not finish within ${timeout}s and was killed`, { ...result })
    return result
  }

  /** Runs to the end with output going to `sink` as it comes; resolves with how it ended. */
  async stream(owner: string, id: string, req: ExecInput, sink: OutputSink, signal?: AbortSignal) {
    const timeout = req.timeoutSeconds ?? DEFAULT_EXEC_TIMEOUT_SECONDS
    const out = await this.calls.onSandbox(owner, id, (sbx) =>
      this.recorded(id, req, () =>
        sbx.exec(guestRequest(req, timeout, req.maxOutputBytes ?? 0), signal, toHandlers(sink, req.encoding)),
      ),
    )
    const { exitCode, signal: sig, timedOut, truncated, durationMs } = out
    return { exitCode, signal: sig, timedOut, truncated, durationMs }
  }

  async start(owner: string, id: string, req: ExecInput): Promise<{ pid: number }> {
    // a background command has no timeout unless one is asked for
    const started = await this.calls.onSandbox(owner, id, (sbx) =>
      sbx.startProcess(guestRequest(req, req.timeoutSeconds ?? 0, 0)),
    )
    const cmd = Array.isArray(req.cmd) ? req.cmd.join(' ') : req.cmd
    await this.events.record(id, 'exec-started', `pid ${started.pid}: ${cmd.slice(0, 200)}`)
    return started
  }

  async list(owner: string, id: string): Promise<ProcessInfo[]> {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.processOp({ op: 'proc_list' }))
  }

  /** Streams a background process's output from `offset` until it exits (or `signal` detaches). */
  attach(
    owner: string,
    id: string,
    pid: number,
    opts: { offset: number; encoding: Encoding; output: boolean },
    sink: OutputSink,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null> {
    return this.calls.onSandbox(owner, id, (sbx) =>
      sbx.attachProcess(pid, opts, toHandlers(sink, opts.encoding), signal),
    )
  }

  /** A program on a terminal; resolves when it exits. `ready` gets the session as soon as it exists. */
  openPty(
    owner: string,
    id: string,
    spec: PtySpec,
    onData: (chunk: Uint8Array) => void | Promise<void>,
    ready: (session: PtySession) => void,
  ): Promise<{ exitCode: number; signal: string | null }> {
    // the terminal counts as activity for as long as it is open
    return this.calls.onSandbox(owner, id, async (sbx) => {
      const session = await sbx.openPty(spec, onData)
      ready(session)
      await this.events.record(id, 'pty-opened', spec.cmd ?? spec.argv?.join(' ') ?? 'bash -l')
      return session.exited
    })
  }

  async stdin(owner: string, id: string, pid: number, data: Buffer, eof: boolean): Promise<void> {
    await this.calls.onSandbox(owner, id, async (sbx) => {
      if (data.length > 0) await sbx.processOp({ op: 'proc_stdin', pid, data: data.toString('base64') })
      if (eof) await sbx.processOp({ op: 'proc_stdin', pid, eof: true })
    })
  }

  async signal(owner: string, id: string, pid: number, sig: string): Promise<ProcessInfo> {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.processOp({ op: 'proc_signal', pid, signal: sig }))
  }
}

/** Which method serves each of the guest's process operations (see guest-ops-served.ts). */
export const processOpsServed = {
  proc_list: 'list',
  proc_stdin: 'stdin',
  proc_signal: 'signal',
} as const satisfies ServedBy<GuestProcessOps, ExecService>
