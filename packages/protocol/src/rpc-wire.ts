// What crosses an RPC channel: frames, the messages they carry, and values JSON cannot say.
//
// A frame is `u32 header length | JSON header | the header's byte blobs, back to back`. Inside the
// JSON, a value JSON cannot carry is a one-key object whose key starts with NUL (no user text the
// agent sees can hold one: env names, paths and argv are NUL-free by validation).
import { z } from 'zod'
import { AppError, isErrorCode } from './errors.ts'

/** What one frame's header says; `a` and `v` hold values in their wire form (see TAG). */
export const Msg = z.discriminatedUnion('t', [
  /** A call of a served method; `c` names the call (and every reference made for it). */
  z.object({ t: z.literal('call'), c: z.number(), m: z.string(), a: z.array(z.unknown()) }),
  z.object({ t: z.literal('ret'), c: z.number(), v: z.unknown().optional(), e: z.unknown().optional() }),
  /** A call of a function the receiver exported; `k` is the caller's id for the reply. */
  z.object({ t: z.literal('invoke'), f: z.number(), k: z.number(), a: z.array(z.unknown()) }),
  /** The next value of a stream or iterator the receiver exported. */
  z.object({ t: z.literal('pull'), s: z.number(), k: z.number() }),
  z.object({ t: z.literal('cancel'), s: z.number() }),
  z.object({ t: z.literal('reply'), k: z.number(), v: z.unknown().optional(), e: z.unknown().optional() }),
  /** A promise the sender exported settled. */
  z.object({ t: z.literal('settle'), p: z.number(), v: z.unknown().optional(), e: z.unknown().optional() }),
  z.object({ t: z.literal('abort'), s: z.number() }),
  /** An event the sender raises on its own (not part of any call). */
  z.object({ t: z.literal('event'), n: z.string(), a: z.array(z.unknown()) }),
])
export type Msg = z.infer<typeof Msg>

const ErrorWire = z.object({
  message: z.string(),
  name: z.string().optional(),
  code: z.string().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
})

/** The keys of the one-key objects that stand for values JSON cannot carry. */
export const TAG = {
  bytes: '\u0000b',
  undef: '\u0000u',
  error: '\u0000e',
  fn: '\u0000f',
  promise: '\u0000p',
  signal: '\u0000s',
  iter: '\u0000i',
  stream: '\u0000r',
} as const

/** A one-key object tagging a value JSON cannot carry. */
export function tagged(value: object): [string, unknown] | null {
  const keys = Object.keys(value)
  if (keys.length !== 1 || !keys[0]?.startsWith('\u0000')) return null
  return [keys[0], (value as Record<string, unknown>)[keys[0]]]
}

/** The wire form of a failure: an `AppError` keeps its code and details; others their message. */
export function errorToWire(err: unknown): z.infer<typeof ErrorWire> {
  if (err instanceof AppError) return { message: err.message, name: err.name, code: err.code, details: err.details }
  if (err instanceof Error) return { message: err.message, name: err.name }
  return { message: String(err) }
}

/** A failure from the other end: an `AppError` again when its code is one of ours. */
export function errorFromWire(raw: unknown): Error {
  const parsed = ErrorWire.safeParse(raw)
  if (!parsed.success) return new AppError('INTERNAL', 'the other end failed with an unreadable error')
  const { message, name, code, details } = parsed.data
  if (isErrorCode(code)) return new AppError(code, message, details)
  const err = new Error(message)
  if (name) err.name = name
  return err
}

/** A frame of `header` (JSON) and the byte blobs it names by index. */
export function encodeFrame(header: unknown, blobs: Uint8Array[]): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify({ h: header, b: blobs.map((b) => b.length) }))
  const total = 4 + json.length + blobs.reduce((n, b) => n + b.length, 0)
  const out = new Uint8Array(total)
  new DataView(out.buffer).setUint32(0, json.length)
  out.set(json, 4)
  let at = 4 + json.length
  for (const b of blobs) {
    out.set(b, at)
    at += b.length
  }
  return out
}

const FrameHeader = z.object({ h: z.unknown(), b: z.array(z.number().int().nonnegative()) })

/** A frame's header and blobs; a frame that overruns itself throws. */
export function decodeFrame(frame: Uint8Array): { header: unknown; blobs: Uint8Array[] } {
  if (frame.length < 4) throw new Error('frame too short')
  const len = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(0)
  if (4 + len > frame.length) throw new Error('frame header overruns the frame')
  const { h, b } = FrameHeader.parse(JSON.parse(new TextDecoder().decode(frame.subarray(4, 4 + len))))
  const blobs: Uint8Array[] = []
  let at = 4 + len
  for (const n of b) {
    if (at + n > frame.length) throw new Error('frame blob overruns the frame')
    blobs.push(frame.subarray(at, at + n))
    at += n
  }
  return { header: h, blobs }
}
