// Byte/text conversions for exec output, stdin and file bodies.

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function toBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? encoder.encode(data) : data
}

export function toText(data: Uint8Array): string {
  return decoder.decode(data)
}

// btoa/atob take "binary strings" (one char per byte); they are in every runtime the SDK serves.
const CHUNK = 0x8000

export function toBase64(data: Uint8Array): string {
  let binary = ''
  for (let i = 0; i < data.length; i += CHUNK) binary += String.fromCharCode(...data.subarray(i, i + CHUNK))
  return btoa(binary)
}

export function fromBase64(text: string): Uint8Array {
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

/** fetch bodies must be backed by an ArrayBuffer; only views onto a SharedArrayBuffer are copied. */
export function fetchableBytes(data: Uint8Array): Uint8Array<ArrayBuffer> {
  return data.buffer instanceof ArrayBuffer ? (data as Uint8Array<ArrayBuffer>) : new Uint8Array(data)
}
