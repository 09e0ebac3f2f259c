// The typed client of one sandbox's guest daemon: each call a request on its own channel, its
// answer checked against the protocol's schemas, streamed output flow controlled.
import {
  AppError,
  FileEntry,
  GuestAttachEnd,
  GuestCellResult,
  type GuestContextOp,
  type GuestContextOps,
  type GuestExecOutput,
  type GuestExecRequest,
  GuestExit,
  type GuestFileOp,
  type GuestFileOps,
  GuestPing,
  type GuestProcessOp,
  type GuestProcessOps,
  GuestProcessStarted,
  GuestResult,
  type GuestRunCodeOutput,
  type GuestRunCodeRequest,
  GuestSwept,
  guestContextResults,
  guestFileResults,
  guestProcessResults,
  type ProcessExit,
  type PtySession,
  type PtySpec,
  type RunCodeHandlers,
  type StreamHandlers,
  WatchEnd,
  type WatchHandlers,
  type WriteOptions,
} from '@forkbox/protocol'
import type { DataFrameType, GuestConnection } from './connection.ts'
import { FileReadStream } from './file-read.ts'
import { AckedDelivery, STREAM_WINDOW, sendStream } from './flow.ts'
import { FrameType } from './frames.ts'

/** An OOM sweep watches the processes ~1.5 s; past this the guest is not answering. */
const OOM_SWEEP_DEADLINE_MS = 30_000
/** Extra time the agent gives the guest to report a timed-out exec before giving up on it. */
const EXEC_GRACE_MS = 10_000
/** Output a command or cell that is waited on may buffer per stream when its request sets no cap. */
const MAX_BUFFERED_OUTPUT_BYTES = 64 * 1024 * 1024
/** The guest cuts output at the request's cap itself; past the cap and this, it is broken (or forged). */
const OUTPUT_SLACK_BYTES = 64 * 1024
/** Rich outputs (plots, HTML) of one cell; past this they are dropped and the cell is `truncated`. */
const MAX_DISPLAY_BYTES = 64 * 1024 * 1024
const OUTPUT_TYPES: readonly DataFrameType[] = [FrameType.stdout, FrameType.stderr]
/** Watch events the guest sends ahead of the agent's acks (its WINDOW). */
const WATCH_WINDOW_EVENTS = 4096
const WatchResult = GuestResult.extend({ value: WatchEnd })
/** A file write ends with the file as written. */
const WriteResult = GuestResult.extend({ value: FileEntry })

/** The per-stream cap of output that is buffered until the request ends (0 asks for none: the most). */
function bufferCap(maxOutputBytes: number): number {
  return maxOutputBytes > 0 ? Math.min(maxOutputBytes, MAX_BUFFERED_OUTPUT_BYTES) : MAX_BUFFERED_OUTPUT_BYTES
}

export class GuestClient {
  constructor(readonly conn: GuestConnection) {}

  exec(req: GuestExecRequest, signal?: AbortSignal, stream?: StreamHandlers): Promise<GuestExecOutput> {
    const conn = this.conn
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
          // the guest answers a timed-out command itself; one that cannot is given up on here
          ...(req.timeoutMs > 0 && {
            deadlineMs: req.timeoutMs + 2 * EXEC_GRACE_MS,
            deadlineError: () =>
              new AppError(
                'EXEC_TIMEOUT',
                `command did not finish within ${Math.round(req.timeoutMs / 1000)}s, and the sandbox did not confirm it ended`,
              ),
          }),
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
      if (req.stdin !== undefined && channel) void sendStream(conn, FrameType.stdin, channel, [req.stdin])
    })
  }

  startProcess(req: GuestExecRequest): Promise<{ pid: number }> {
    const conn = this.conn
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
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null> {
    const conn = this.conn
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

  /** A directory watch: events batched as the guest reads them, acked (by count) once delivered. */
  watchDir(
    req: { path: string; recursive?: boolean; user?: string },
    handlers: WatchHandlers,
    signal?: AbortSignal,
  ): Promise<WatchEnd> {
    const conn = this.conn
    return new Promise((resolve, reject) => {
      let channel = 0
      let unacked = 0
      let flooded = false
      const delivery = new AckedDelivery(conn, () => channel)
      const stop = () => conn.sendJson(channel, { op: 'unwatch' })
      channel = conn.open(
        { op: 'watch', path: req.path, recursive: req.recursive ?? false, user: req.user },
        {
          events: ['watching', 'events', 'overflow'],
          terminal: WatchResult,
          onMessage: (msg) => {
            if (flooded) return
            if (msg.type === 'watching') delivery.push(() => handlers.onStart?.(msg.path), 0)
            else if (msg.type === 'overflow') delivery.push(() => handlers.onOverflow?.(msg.reason), 0)
            else if (msg.type === 'events') {
              // the guest holds back past its window: more than that unacked is a broken (or hostile) guest
              unacked += msg.events.length
              if (unacked > WATCH_WINDOW_EVENTS * 2) {
                flooded = true
                stop()
                return reject(new AppError('GUEST_ERROR', 'the sandbox sent more watch events than it was allowed'))
              }
              delivery.push(async () => {
                try {
                  await handlers.onEvents(msg.events)
                } finally {
                  unacked -= msg.events.length
                }
              }, msg.events.length)
            }
          },
          settle: async (err, msg) => {
            signal?.removeEventListener('abort', stop)
            await delivery.done()
            if (err || !msg) return reject(err)
            resolve(msg.value)
          },
        },
      )
      if (signal?.aborted) stop()
      else signal?.addEventListener('abort', stop)
    })
  }

  openPty(spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>): PtySession {
    const conn = this.conn
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

  processOp<R extends GuestProcessOp>(req: R): Promise<GuestProcessOps[R['op']]['res']> {
    return this.conn.call({ ...req }, guestProcessResults[req.op])
  }

  readFile(path: string, user?: string): Promise<{ size: number | null; stream: ReadableStream<Uint8Array> }> {
    const conn = this.conn
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

  writeFile(path: string, body: AsyncIterable<Uint8Array>, opts: WriteOptions = {}): Promise<FileEntry> {
    const conn = this.conn
    return new Promise((resolve, reject) => {
      let settled = false
      const channel = conn.open(
        { op: 'write', path, mode: opts.mode, user: opts.user, metadata: opts.metadata },
        {
          terminal: WriteResult,
          settle: (err, msg) => {
            settled = true
            if (err || !msg) reject(err)
            else resolve(msg.value)
          },
        },
      )
      if (!channel) return
      // a refused write stops taking the body; a body that fails (the client went away) aborts
      // the guest side, which removes its temp file and leaves the target untouched
      sendStream(conn, FrameType.file, channel, body, () => settled).catch((err) => {
        conn.sendJson(channel, { op: 'abort' })
        reject(err)
      })
    })
  }

  /** Whether the guest answers at all (the watchdog's heartbeat): fails after `deadlineMs`. */
  async ping(deadlineMs: number): Promise<void> {
    await this.conn.call({ op: 'ping' }, GuestPing, deadlineMs)
  }

  /** Ends the processes left wedged after the host's OOM killer took their stubs; `stuck`: those that would not end. */
  oomSweep(): Promise<{ killed: number[]; stuck: number[] }> {
    return this.conn.call({ op: 'oom_sweep' }, GuestSwept, OOM_SWEEP_DEADLINE_MS)
  }

  fileOp<R extends GuestFileOp>(req: R): Promise<GuestFileOps[R['op']]['res']> {
    return this.conn.call({ ...req }, guestFileResults[req.op])
  }

  runCode(req: GuestRunCodeRequest, handlers: RunCodeHandlers = {}, signal?: AbortSignal): Promise<GuestRunCodeOutput> {
    const conn = this.conn
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
          // the guest ends a timed-out cell itself (an interrupt, then a kernel restart); one that cannot is given up on here
          ...(req.timeoutMs > 0 && {
            deadlineMs: req.timeoutMs + 2 * EXEC_GRACE_MS,
            deadlineError: () =>
              new AppError(
                'EXEC_TIMEOUT',
                `the cell did not finish within ${Math.round(req.timeoutMs / 1000)}s, and the sandbox did not confirm it ended`,
              ),
          }),
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

  codeContext<R extends GuestContextOp>(req: R): Promise<GuestContextOps[R['op']]['res']> {
    return this.conn.call({ ...req }, guestContextResults[req.op])
  }
}
