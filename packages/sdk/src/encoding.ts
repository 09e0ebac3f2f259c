// Byte/text conversions for exec output, stdin and file bodies.

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function toBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data
}

export function toText(data: Uint8Array): string {
  return decoder.decode(data)
}

// base64 is the runtime's: Node's Buffer (~80x faster than btoa for 16 MB of exec stdin), the
// browser's btoa/atob
export { fromBase64, toBase64 } from './platform/index.ts'

/** fetch bodies must be backed by an ArrayBuffer; only views onto a SharedArrayBuffer are copied. */
export function fetchableBytes(data: Uint8Array): Uint8Array<ArrayBuffer> {
  return data.buffer instanceof ArrayBuffer ? (data as Uint8Array<ArrayBuffer>) : new Uint8Array(data)
}
