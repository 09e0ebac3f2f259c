// One multiplexed conversation with a sandbox's guest daemon over its init process's stdio.
import type { Readable, Writable } from 'node:stream'
import { AppError, type ErrorCode, isErrorCode } from '@forkbox/protocol'
import { encodeFrame, FrameDecoder, FrameType, findResyncFrame } from './frames.ts'

export interface GuestMessage {
  type: string
  [key: string]: unknown
}

/** What a request's channel receives until its terminal message. */
export interface ChannelHandler {
  onData?(type: number, payload: Buffer): void
  onMessage?(msg: GuestMessage): void
  /** Called once with the terminal `result` / `exit` message, or with the failure. */
  settle(err: Error | null, msg?: GuestMessage): void
}

const TERMINAL = new Set(['result', 'exit', 'error'])

export class GuestConnection {
  private readonly decoder = new FrameDecoder()
  private readonly channels = new Map<number, ChannelHandler>()
  private nextChannel = 1
  private failure: Error | null = null
  readonly ready: Promise<GuestMessage>
  private resolveReady!: (msg: GuestMessage) => void
  private rejectReady!: (err: Error) => void

  /** Re-attaching: bytes are skipped up to the guest's `resynced` frame. */
  private skipping: Buffer | null = null

  constructor(
    private readonly input: Writable,
    output: Readable,
    opts: { resync?: boolean } = {},
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve
      this.rejectReady = reject
    })
    this.ready.catch(() => {})
    if (opts.resync) this.skipping = Buffer.alloc(0)
    output.on('data', (chunk: Buffer) => this.onBytes(chunk))
    input.on('error', () => {})
  }

  private onBytes(chunk: Buffer): void {
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
      this.fail(err as Error)
      return
    }
    for (const frame of frames) {
      if (frame.channel === 0) {
        if (frame.type === FrameType.json) {
          const msg = JSON.parse(frame.payload.toString('utf8')) as GuestMessage
          if (msg.type === 'ready') this.resolveReady(msg)
          if (msg.type === 'resynced') {
            // channels the old agent used may still carry output: start past them
            this.nextChannel = Math.max(this.nextChannel, Number(msg.nextChannel) || 1)
            this.resolveReady(msg)
          }
        }
        continue
      }
      const handler = this.channels.get(frame.channel)
      if (!handler) continue
      if (frame.type !== FrameType.json) {
        handler.onData?.(frame.type, frame.payload)
        continue
      }
      const msg = JSON.parse(frame.payload.toString('utf8')) as GuestMessage
      if (!TERMINAL.has(msg.type)) {
        handler.onMessage?.(msg)
        continue
      }
      this.channels.delete(frame.channel)
      if (msg.type === 'error') handler.settle(guestError(msg))
      else handler.settle(null, msg)
    }
  }

  /** Opens a channel and sends its first request. */
  open(request: Record<string, unknown>, handler: ChannelHandler): number {
    if (this.failure) {
      handler.settle(this.failure)
      return 0
    }
    const channel = this.nextChannel++
    this.channels.set(channel, handler)
    this.sendJson(channel, request)
    return channel
  }

  sendJson(channel: number, msg: Record<string, unknown>): boolean {
    return this.send(FrameType.json, channel, Buffer.from(JSON.stringify(msg)))
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

  /** Simple request → `result.value`. */
  call<T = unknown>(request: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.open(request, {
        settle: (err, msg) => (err ? reject(err) : resolve(msg?.value as T)),
      })
    })
  }

  /** Ends every pending request with `err`; later requests fail at once with it. */
  fail(err: Error): void {
    if (this.failure) return
    this.failure = err
    this.rejectReady(err)
    const pending = [...this.channels.values()]
    this.channels.clear()
    for (const handler of pending) handler.settle(err)
    this.input.destroy()
  }

  get failed(): boolean {
    return this.failure !== null
  }
}

function guestError(msg: GuestMessage): AppError {
  const code: ErrorCode = isErrorCode(msg.code) ? msg.code : 'GUEST_ERROR'
  return new AppError(code, String(msg.message ?? 'guest error'))
}
