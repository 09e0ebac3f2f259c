// Connect protocol framing for tests that call the E2B layer's streaming routes.

/** A Connect stream request body: one envelope (flags 0, big-endian length, JSON). */
export function envelope(msg: unknown): Uint8Array<ArrayBuffer> {
  const data = Buffer.from(JSON.stringify(msg))
  const out = new Uint8Array(5 + data.length)
  new DataView(out.buffer).setUint32(1, data.length)
  out.set(data, 5)
  return out
}
