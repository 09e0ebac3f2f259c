// One multiplexed conversation with a sandbox's guest daemon over its init process's stdio. What the
// guest sends is untrusted (root in the sandbox can write to it): every frame is checked, each
// channel's bytes are capped, and a guest that breaks the protocol fails the whole conversation.
import type { Readable, Writable } from 'node:stream'
import {
  AppError,
  GuestChannelMessage,
  GuestConfigured,
  GuestDaemonMessage,
  type GuestEventMessage,
  type GuestRequest,
  GuestResult,
  isGuestErrorCode,
} from '@forkbox/protocol'

/** The guest's `configure` request (a restored guest's first). */
type GuestConfigure = Extract<GuestRequest, { op: 'configure' }>

import type { z } from 'zod'
import { encodeFrame, FrameDecoder, FrameType, findResyncFrame } from './frames.ts'

/** Thrown by a channel's handler when what the guest sent breaks the protocol: fails the connection. */
export class GuestProtocolError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'GuestProtocolError'
  }
}

export type DataFrameType = typeof FrameType.stdout | typeof FrameType.stderr | typeof FrameType.file
const DATA_TYPES: readonly number[] = [FrameType.stdout, FrameType.stderr, FrameType.file]
const FRAME_NAMES: Record<number, string> = { 1: 'json', 2: 'stdout', 3: 'stderr', 4: 'stdin', 5: 'file' }

/** How far past its window a flow-controlled guest may run: the one read it sends before pausing. */
export const WINDOW_SLACK_BYTES = 1024 * 1024
/** An error message from the guest is cut to this many characters. */
const MAX_ERROR_MESSAGE = 8 * 1024

type GuestResultMessage = z.infer<typeof GuestResult>

/** What a request's channel receives until its terminal message. */
export interface ChannelHandler<T = GuestResultMessage> {
  /** Data frames this request takes (default: stdout, stderr and file when `onData` is given, else none). */
  dataTypes?: readonly DataFrameType[]
  /** Flow control: bytes the guest may have sent that `ack` has not given back yet. */
  window?: number
  /** Without flow control: bytes of each data frame type the guest may send in all. */
  maxBytesPerStream?: number
  /** Messages this request takes before its end (default: any when `onMessage` is given, else none). */
  events?: readonly GuestEventMessage['type'][]
  /** What its `result` or `exit` must look like (default: a `result`); an `error` may always end it. */
  terminal?: z.ZodType<T>
  onData?(type: DataFrameType, payload: Buffer): void
  /** `bytes`: the size of the message's frame. */
  onMessage?(msg: GuestEventMessage, bytes: number): void
  /** Called once with the terminal message, or with the failure. */
  settle(err: Error | null, msg?: T): void
  /**
   * The request is given up on after this long with no terminal message (the guest may be unable
   * to answer at all): it settles with `deadlineError()` and the owner is told (`onDeadline`).
   */
  deadlineMs?: number
  deadlineError?(): Error
}

/** How long a simple request (`call`) may go unanswered: far past any the guest serves. */
export const CALL_DEADLINE_MS = 120_000

export interface GuestConnectionOptions {
  /** Re-attaching: bytes are skipped up to the guest's `resynced` frame. */
  resync?: boolean
  /** The guest broke the protocol; the connection has failed with `err` (SANDBOX_ERRORED, reason
   * guest_protocol_error). Called once. */
  onProtocolError?: (err: AppError, detail: string) => void
  /** A request passed its deadline unanswered: the owner checks whether the guest still answers. */
  onDeadline?: () => void
  log?: (message: string) => void
}

interface OpenChannel {
  handler: ChannelHandler<unknown>
  /** Bytes received per data frame type (without flow control). */
  received: Map<number, number>
  /** Bytes received and not acked yet (with flow control). */
  unacked: number
  deadline?: NodeJS.Timeout
}

export class GuestConnection {
  private readonly decoder = new FrameDecoder()
  private readonly channels = new Map<number, OpenChannel>()
  private nextChannel = 1
  private failure: Error | null = null
  readonly ready: Promise<GuestDaemonMessage>
  private resolveReady!: (msg: GuestDaemonMessage) => void
  private rejectReady!: (err: Error) => void
  private readonly log: (message: string) => void

  /** Re-attaching: bytes are skipped up to the guest's `resynced` frame. */
  private skipping: Buffer | null = null
  /** A `resynced` is the answer to our own resync only; any other is the guest (or root in it) acting alone. */
  private awaitingResync = false

  constructor(
    private readonly input: Writable,
    output: Readable,
    private readonly opts: GuestConnectionOptions = {},
  ) {
    this.log = opts.log ?? (() => {})
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve
      this.rejectReady = reject
    })
    this.ready.catch(() => {})
    if (opts.resync) {
      this.skipping = Buffer.alloc(0)
      this.awaitingResync = true
    }
    output.on('data', (chunk: Buffer) => this.onBytes(chunk))
    input.on('error', () => {})
  }

  private onBytes(chunk: Buffer): void {
    if (this.failure) return
    try {
      this.receive(chunk)
    } catch (err) {
      // a fault of ours, not the guest's; still it never reaches the stream's 'data' event
      this.log(`guest connection: cannot handle the guest's bytes: ${describe(err)}`)
      this.broken(`the agent could not handle its frames (${describe(err)})`)
    }
  }

  private receive(chunk: Buffer): void {
    if (this.skipping) {
      const seen = Buffer.concat([this.skipping, chunk])
      const at = findResyncFrame(seen)
      if (at < 0) {
        // keep a tail long enough to hold a header and the start of the mark
        this.skipping = seen.subarray(Math.max(0, seen.length - 64))
        return
      }
      this.skipping = null
      chunk = seen.subarray(at)
    }
    let frames: ReturnType<FrameDecoder['push']>
    try {
      frames = this.decoder.push(chunk)
    } catch (err) {
      this.broken(describe(err))
      return
    }
    for (const frame of frames) {
      if (this.failure) return
      this.dispatch(frame.type, frame.channel, frame.payload)
    }
  }

  private dispatch(type: number, channel: number, payload: Buffer): void {
    const kind = FRAME_NAMES[type]
    if (!kind || type === FrameType.stdin) {
      this.broken(`a frame of type ${type} on channel ${channel}`)
      return
    }
    if (channel === 0) {
      if (type !== FrameType.json) {
        this.broken(`a ${kind} frame on channel 0`)
        return
      }
      const msg = this.parse(payload, GuestDaemonMessage, 0)
      if (!msg) return
      if (msg.type === 'resynced') {
        if (!this.awaitingResync) {
          this.broken('a resync the agent did not ask for')
          return
        }
        this.awaitingResync = false
        // channels the old agent used may still carry output: start past them
        this.nextChannel = Math.max(this.nextChannel, msg.nextChannel)
      }
      this.resolveReady(msg)
      return
    }
    if (type !== FrameType.json) {
      const open = this.channels.get(channel)
      // output of a request that ended or was given up on (or an old agent's, after a resync)
      if (!open) return
      this.onData(channel, open, type as DataFrameType, payload)
      return
    }
    const msg = this.parse(payload, GuestChannelMessage, channel)
    if (!msg) return
    const open = this.channels.get(channel)
    if (!open) return
    const { handler } = open
    if (msg.type === 'error') {
      this.channels.delete(channel)
      this.settle(channel, open, guestError(msg.code, msg.message))
      return
    }
    if (msg.type === 'result' || msg.type === 'exit') {
      const end = (handler.terminal ?? GuestResult).safeParse(msg)
      if (!end.success) {
        this.broken(`channel ${channel} ended with a malformed ${msg.type} (${issue(end.error)})`)
        return
      }
      this.channels.delete(channel)
      this.settle(channel, open, null, end.data)
      return
    }
    const allowed = handler.events ? handler.events.includes(msg.type) : Boolean(handler.onMessage)
    if (!allowed) {
      this.broken(`a ${msg.type} message on channel ${channel}, whose request takes none`)
      return
    }
    this.invoke(channel, () => handler.onMessage?.(msg, payload.length))
  }

  private onData(channel: number, open: OpenChannel, type: DataFrameType, payload: Buffer): void {
    const { handler } = open
    const kind = FRAME_NAMES[type]
    const allowed = handler.dataTypes ? handler.dataTypes.includes(type) : Boolean(handler.onData)
    if (!allowed || !DATA_TYPES.includes(type)) {
      this.broken(`a ${kind} frame on channel ${channel}, whose request takes none`)
      return
    }
    if (handler.window !== undefined) {
      open.unacked += payload.length
      if (open.unacked > handler.window + WINDOW_SLACK_BYTES) {
        this.broken(`${open.unacked} bytes unacked on channel ${channel}, past its window of ${handler.window}`)
        return
      }
    } else if (handler.maxBytesPerStream !== undefined) {
      const total = (open.received.get(type) ?? 0) + payload.length
      open.received.set(type, total)
      if (total > handler.maxBytesPerStream) {
        this.broken(`more than ${handler.maxBytesPerStream} bytes of ${kind} on channel ${channel}`)
        return
      }
    }
    this.invoke(channel, () => handler.onData?.(type, payload))
  }

  /** The JSON message in `payload` as `schema` has it, or null when the connection failed on it. */
  private parse<S extends z.ZodType>(payload: Buffer, schema: S, channel: number): z.infer<S> | null {
    let value: unknown
    try {
      value = JSON.parse(payload.toString('utf8'))
    } catch {
      this.broken(`malformed JSON on channel ${channel}`)
      return null
    }
    const msg = schema.safeParse(value)
    if (!msg.success) {
      this.broken(`an invalid message on channel ${channel} (${issue(msg.error)})`)
      return null
    }
    return msg.data
  }

  /** Runs a handler; what it throws (or its promise rejects with) fails its channel, not the process. */
  private invoke(channel: number, fn: () => unknown): void {
    let out: unknown
    try {
      out = fn()
    } catch (err) {
      this.handlerFailed(channel, err)
      return
    }
    if (isThenable(out)) out.then(undefined, (err: unknown) => this.handlerFailed(channel, err))
  }

  private handlerFailed(channel: number, err: unknown): void {
    if (err instanceof GuestProtocolError) {
      this.broken(err.message)
      return
    }
    this.log(`guest connection: the handler of channel ${channel} failed: ${describe(err)}`)
    const open = this.channels.get(channel)
    if (!open) return
    // the request is given up on; what the guest still sends on its channel is dropped
    this.channels.delete(channel)
    this.settle(channel, open, new AppError('INTERNAL', `the request failed in the agent: ${describe(err)}`))
  }

  private settle(channel: number, open: OpenChannel, err: Error | null, msg?: unknown): void {
    if (open.deadline) clearTimeout(open.deadline)
    let out: unknown
    try {
      out = open.handler.settle(err, msg)
    } catch (e) {
      this.log(`guest connection: settling channel ${channel} failed: ${describe(e)}`)
      return
    }
    if (isThenable(out))
      out.then(undefined, (e: unknown) =>
        this.log(`guest connection: settling channel ${channel} failed: ${describe(e)}`),
      )
  }

  /** The guest broke the protocol: the connection fails and the owner is told. */
  private broken(detail: string): void {
    if (this.failure) return
    const err = new AppError('SANDBOX_ERRORED', `the sandbox's guest daemon broke the protocol: ${detail}`, {
      reason: 'guest_protocol_error',
    })
    this.fail(err)
    try {
      this.opts.onProtocolError?.(err, detail)
    } catch (e) {
      this.log(`guest connection: reporting a protocol error failed: ${describe(e)}`)
    }
  }

  /** Opens a channel and sends its first request. */
  open<T = GuestResultMessage>(request: GuestRequest, handler: ChannelHandler<T>): number {
    const open: OpenChannel = { handler: handler as ChannelHandler<unknown>, received: new Map(), unacked: 0 }
    if (this.failure) {
      this.settle(0, open, this.failure)
      return 0
    }
    const channel = this.nextChannel++
    this.channels.set(channel, open)
    if (handler.deadlineMs !== undefined) {
      const ms = handler.deadlineMs
      open.deadline = setTimeout(() => {
        if (this.channels.get(channel) !== open) return
        // what the guest still sends on it is dropped
        this.channels.delete(channel)
        const err =
          handler.deadlineError?.() ??
          new AppError('GUEST_ERROR', `the sandbox did not answer within ${Math.round(ms / 1000)} s`)
        this.log(`guest connection: channel ${channel} passed its deadline (${ms} ms)`)
        this.settle(channel, open, err)
        try {
          this.opts.onDeadline?.()
        } catch (e) {
          this.log(`guest connection: reporting a deadline failed: ${describe(e)}`)
        }
      }, ms)
      open.deadline.unref()
    }
    this.sendJson(channel, request)
    return channel
  }

  sendJson(channel: number, msg: GuestRequest): boolean {
    return this.send(FrameType.json, channel, Buffer.from(JSON.stringify(msg)))
  }

  /** Gives a flow-controlled channel `bytes` of its window back. */
  ack(channel: number, bytes: number): void {
    const open = this.channels.get(channel)
    if (open) open.unacked = Math.max(0, open.unacked - bytes)
    this.sendJson(channel, { op: 'ack', bytes })
  }

  /** Returns false when the pipe is full; wait for `drained()` before sending more. */
  send(type: FrameType, channel: number, payload?: Uint8Array): boolean {
    if (this.failure) return true
    return this.input.write(encodeFrame(type, channel, payload))
  }

  drained(): Promise<void> {
    if (!this.input.writableNeedDrain || this.failure) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        this.input.off('drain', done)
        this.input.off('close', done)
        resolve()
      }
      this.input.on('drain', done)
      this.input.on('close', done)
    })
  }

  /** Simple request → `result.value`, checked against `value` when given; unanswered after `deadlineMs`, it fails. */
  call<S extends z.ZodType>(request: GuestRequest, value: S, deadlineMs?: number): Promise<z.output<S>>
  call(request: GuestRequest): Promise<unknown>
  call(request: GuestRequest, value?: z.ZodType, deadlineMs = CALL_DEADLINE_MS): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.open(request, {
        terminal: value ? GuestResult.extend({ value }) : GuestResult,
        deadlineMs,
        settle: (err, msg) => (err ? reject(err) : resolve(msg?.value)),
      })
    })
  }

  /**
   * A restored guest's first answer: the channels of the agent its snapshot was taken under may
   * still carry frames, so new requests start past them (as after a resync).
   */
  async configureRestored(request: Omit<GuestConfigure, 'op' | 'restored'>): Promise<void> {
    const answer = await this.call({ ...request, op: 'configure', restored: true }, GuestConfigured)
    // a guest older than this answer says nothing: its snapshot is one without that risk fixed
    if (answer.nextChannel !== undefined) this.nextChannel = Math.max(this.nextChannel, answer.nextChannel)
  }

  /** Ends every pending request with `err`; later requests fail at once with it. */
  fail(err: Error): void {
    if (this.failure) return
    this.failure = err
    this.rejectReady(err)
    const pending = [...this.channels]
    this.channels.clear()
    for (const [channel, open] of pending) this.settle(channel, open, err)
    this.input.destroy()
  }

  /** Requests and streams open on this connection (exec, attach, terminal, watch, cell, ...). */
  get openChannels(): number {
    return this.channels.size
  }

  get failed(): boolean {
    return this.failure !== null
  }

  /** Why it failed, if it did. */
  get error(): Error | null {
    return this.failure
  }
}

function guestError(code: string, message: string): AppError {
  const text = message.length > MAX_ERROR_MESSAGE ? `${message.slice(0, MAX_ERROR_MESSAGE)}…` : message
  return new AppError(isGuestErrorCode(code) ? code : 'GUEST_ERROR', text)
}

function issue(err: z.ZodError): string {
  const first = err.issues[0]
  if (!first) return 'invalid'
  const path = first.path.length > 0 ? `${first.path.join('.')}: ` : ''
  // names in it are the guest's: no control characters into our logs
  return `${path}${first.message}`.slice(0, 200).replace(/[^\x20-\x7e]/g, '?')
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
}
