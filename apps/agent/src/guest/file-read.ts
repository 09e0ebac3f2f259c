// A file the guest streams to the agent, as a pull-based ReadableStream: a chunk is handed on only
// when the consumer asks for one, and acked to the guest (its flow-control window) once handed on.
import { AppError } from '@forkbox/protocol'

/** Most bytes of a file of unknown size (procfs, sysfs) the guest sends; it refuses past that. */
export const UNKNOWN_SIZE_MAX_BYTES = 16 * 1024 * 1024

/** How the stream reaches its guest channel. */
export interface FileReadChannel {
  /** Runs `deliver` after every delivery pushed before it, then acks `bytes` to the guest (AckedDelivery). */
  push(deliver: () => Promise<void>, bytes: number): void
  /** Tells the guest to stop reading and close the file. */
  abort(): void
}

/**
 * Fed by the guest channel's handlers (`open`, `data`, `end`), none of which ever throws: once the
 * stream is finished (consumer gone, error, end) whatever still arrives is dropped. A declared size
 * is a hard stop, and so is the flow-control window: a guest that sends past either is cut off.
 */
export class FileReadStream {
  readonly stream: ReadableStream<Uint8Array>
  private controller!: ReadableStreamDefaultController<Uint8Array>
  private size: number | null = null
  private received = 0
  /** Bytes handed to the consumer; `received - handed` is what waits in this process. */
  private handed = 0
  private finished = false
  /** The consumer's pending pulls: each resolves once a chunk (or the end) is handed over. */
  private pulls: (() => void)[] = []
  /** A delivery waiting for the consumer to pull. */
  private waiting: (() => void) | null = null

  constructor(
    private readonly channel: FileReadChannel,
    private readonly windowBytes: number,
  ) {
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.controller = c
        },
        pull: () =>
          new Promise<void>((resolve) => {
            this.pulls.push(resolve)
            this.wake()
          }),
        cancel: () => this.stop(null),
      },
      // nothing is read ahead of the consumer: a chunk waits in the guest until it is wanted
      { highWaterMark: 0 },
    )
  }

  /** The guest opened the file; `size` null when the kernel does not know it. */
  open(size: number | null): void {
    this.size = size
  }

  data(chunk: Buffer): void {
    if (this.finished || chunk.length === 0) return
    this.received += chunk.length
    const overrun = this.overrun()
    if (overrun) this.stop(overrun)
    else this.channel.push(() => this.handOver(chunk), chunk.length)
  }

  /** The guest's terminal message: null after a clean end of file. */
  end(err: Error | null): void {
    if (this.finished) return
    if (err) {
      this.stop(err, false)
      return
    }
    this.channel.push(async () => {
      if (this.finished) return
      if (this.size !== null && this.received !== this.size)
        this.stop(new AppError('GUEST_ERROR', `the file ended after ${this.received} of ${this.size} bytes`))
      else this.finish(() => this.controller.close())
    }, 0)
  }

  /** What is wrong with the bytes received so far, if anything. */
  private overrun(): AppError | null {
    if (this.size !== null && this.received > this.size)
      return new AppError('GUEST_ERROR', `the guest sent more than the file's ${this.size} bytes`)
    if (this.size === null && this.received > UNKNOWN_SIZE_MAX_BYTES)
      return new AppError(
        'PAYLOAD_TOO_LARGE',
        `a file that reports no size sent more than ${UNKNOWN_SIZE_MAX_BYTES} bytes`,
      )
    if (this.received - this.handed > this.windowBytes)
      return new AppError('GUEST_ERROR', 'the guest sent past its flow-control window')
    return null
  }

  private async handOver(chunk: Buffer): Promise<void> {
    while (!this.finished && this.pulls.length === 0)
      await new Promise<void>((resolve) => {
        this.waiting = resolve
      })
    if (this.finished) return
    this.handed += chunk.length
    this.controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length))
    this.pulls.shift()?.()
  }

  private wake(): void {
    const w = this.waiting
    this.waiting = null
    w?.()
  }

  /** Ends the stream with `err` (null: the consumer cancelled it); the guest is told to stop. */
  private stop(err: Error | null, abortGuest = true): void {
    if (this.finished) return
    if (abortGuest) this.channel.abort()
    this.finish(() => {
      if (err) this.controller.error(err)
    })
  }

  private finish(settle: () => void): void {
    this.finished = true
    try {
      settle()
    } catch {
      // the stream was already closed or errored by its consumer
    }
    for (const resolve of this.pulls.splice(0)) resolve()
    this.wake()
  }
}
