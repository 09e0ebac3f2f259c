// Byte/text conversions for exec output, stdin and file bodies.
import { Buffer } from 'node:buffer'

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function toBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data
}

export function toText(data: Uint8Array): string {
  return decoder.decode(data)
}

export function toBase64(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64')
}

/** A plain Uint8Array copy, so callers never hold a view onto Buffer's shared pool. */
export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(Buffer.from(text, 'base64'))
}

/** fetch bodies must be backed by an ArrayBuffer; only views onto a SharedArrayBuffer are copied. */
export function fetchableBytes(data: Uint8Array): Uint8Array<ArrayBuffer> {
  return data.buffer instanceof ArrayBuffer ? (data as Uint8Array<ArrayBuffer>) : new Uint8Array(data)
}
