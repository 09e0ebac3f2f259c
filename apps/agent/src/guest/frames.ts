// Codec for the guest wire format: u32 BE payload length | u8 type | u32 BE channel | payload.

export const FrameType = { json: 1, stdout: 2, stderr: 3, stdin: 4, file: 5 } as const
export type FrameType = (typeof FrameType)[keyof typeof FrameType]

export const HEADER_BYTES = 9
export const MAX_FRAME_BYTES = 16 * 1024 * 1024

export interface Frame {
  type: number
  channel: number
  payload: Buffer
}

export function encodeFrame(type: FrameType, channel: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES)
  header.writeUInt32BE(payload.length, 0)
  header.writeUInt8(type, 4)
  header.writeUInt32BE(channel, 5)
  return Buffer.concat([header, payload])
}

/** Splits a byte stream into frames; feed it chunks in order. */
export class FrameDecoder {
  private chunks: Buffer[] = []
  private buffered = 0

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    const frames: Frame[] = []
    while (this.buffered >= HEADER_BYTES) {
      const head = this.peek(HEADER_BYTES)
      const length = head.readUInt32BE(0)
      if (length > MAX_FRAME_BYTES) throw new Error(`guest sent an oversize frame (${length} bytes)`)
      if (this.buffered < HEADER_BYTES + length) break
      const all = this.take(HEADER_BYTES + length)
      frames.push({ type: all.readUInt8(4), channel: all.readUInt32BE(5), payload: all.subarray(HEADER_BYTES) })
    }
    return frames
  }

  private peek(n: number): Buffer {
    if (this.chunks[0] && this.chunks[0].length >= n) return this.chunks[0]
    const merged = Buffer.concat(this.chunks)
    this.chunks = [merged]
    return merged
  }

  private take(n: number): Buffer {
    const first = this.peek(n)
    const out = first.subarray(0, n)
    const rest = first.subarray(n)
    this.chunks[0] = rest
    if (rest.length === 0) this.chunks.shift()
    this.buffered -= n
    return out
  }
}

const RESYNC_MARK = Buffer.from('{"type":"resynced"')

/**
 * Finds the guest's `resynced` frame in a byte stream that may start mid-frame (what an agent
 * that died left unread). Returns the offset of its header, or -1.
 */
export function findResyncFrame(bytes: Buffer): number {
  for (let at = bytes.indexOf(RESYNC_MARK, HEADER_BYTES); at >= 0; at = bytes.indexOf(RESYNC_MARK, at + 1)) {
    const start = at - HEADER_BYTES
    const length = bytes.readUInt32BE(start)
    if (bytes.readUInt8(start + 4) === FrameType.json && bytes.readUInt32BE(start + 5) === 0 && length < 4096)
      return start
  }
  return -1
}
