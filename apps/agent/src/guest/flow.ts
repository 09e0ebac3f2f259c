// Flow control with the guest: streamed output acked as its consumer takes it, and bodies sent
// in chunks that wait for the pipe to drain.
import type { GuestConnection } from './connection.ts'
import type { FrameType } from './frames.ts'

/** Bytes of streamed output the guest may send ahead of the consumer (per stream request). */
export const STREAM_WINDOW = 4 * 1024 * 1024
const STDIN_CHUNK = 256 * 1024

/**
 * Streamed output handed to its consumer in order; once the consumer is done with a chunk, the
 * guest is told it may send that many bytes more (its flow-control window).
 */
export class AckedDelivery {
  private tail = Promise.resolve()

  constructor(
    private readonly conn: GuestConnection,
    private readonly channel: () => number,
  ) {}

  push(deliver: () => void | Promise<void>, bytes: number): void {
    this.tail = this.tail
      .then(deliver)
      .catch(() => {})
      .then(() => {
        if (bytes > 0) this.conn.ack(this.channel(), bytes)
      })
  }

  /** Settles once everything pushed so far has been delivered. */
  done(): Promise<void> {
    return this.tail
  }
}

/** Sends `body` on `channel` as frames of `type`, then its end; `stop` cuts it short. */
export async function sendStream(
  conn: GuestConnection,
  type: typeof FrameType.stdin | typeof FrameType.file,
  channel: number,
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  stop: () => boolean = () => false,
): Promise<void> {
  for await (const chunk of body) {
    if (stop()) break
    for (let off = 0; off < chunk.length; off += STDIN_CHUNK) {
      if (!conn.send(type, channel, chunk.subarray(off, off + STDIN_CHUNK))) await conn.drained()
    }
  }
  conn.send(type, channel)
}
