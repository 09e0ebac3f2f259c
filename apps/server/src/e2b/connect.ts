// The Connect protocol as the E2B clients use it (JSON codec, no compression): unary calls are
// plain JSON POSTs; server streams are 5-byte envelopes (flags, big-endian length) of JSON
// messages, closed by an end-stream envelope (flag 2) that carries the error, if any.
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import { stream } from 'hono/streaming'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { errorOf, validationError } from '../http/errors.ts'
import { connectErrors } from './errors.ts'
import { type SandboxCall, sandboxCall } from './sandbox-call.ts'

const END_STREAM = 0b10

function envelope(flags: number, msg: unknown): Uint8Array {
  const data = Buffer.from(JSON.stringify(msg))
  const out = Buffer.alloc(5 + data.length)
  out.writeUInt8(flags, 0)
  out.writeUInt32BE(data.length, 1)
  data.copy(out, 5)
  return out
}

/** A request message checked against its schema (e2b/messages.ts). */
function parse<T extends z.ZodType>(text: string, schema: T): z.output<T> {
  let msg: unknown
  try {
    msg = text.trim() ? JSON.parse(text) : {}
  } catch {
    throw new AppError('MALFORMED_JSON', 'request message is not valid JSON')
  }
  if (typeof msg !== 'object' || msg === null || Array.isArray(msg))
    throw new AppError('VALIDATION_FAILED', 'request message must be a JSON object')
  const parsed = schema.safeParse(msg)
  if (!parsed.success) throw validationError(parsed.error)
  return parsed.data
}

/** The request message of a unary call. */
export async function unaryRequest<T extends z.ZodType>(c: Context<AppEnv>, schema: T): Promise<z.output<T>> {
  return parse(await c.req.text(), schema)
}

/** The one request message of a server-streaming call (the first envelope of the body). */
export async function streamRequest<T extends z.ZodType>(c: Context<AppEnv>, schema: T): Promise<z.output<T>> {
  const body = Buffer.from(await c.req.arrayBuffer())
  if (body.length < 5) throw new AppError('VALIDATION_FAILED', 'missing request envelope')
  if (body.readUInt8(0) & 0b1) throw new AppError('VALIDATION_FAILED', 'compressed messages are not supported')
  const length = body.readUInt32BE(1)
  if (body.length < 5 + length) throw new AppError('VALIDATION_FAILED', 'truncated request envelope')
  return parse(body.subarray(5, 5 + length).toString('utf8'), schema)
}

/** `Connect-Timeout-Ms`, if the client set one. */
export function deadlineMs(c: Context<AppEnv>): number | undefined {
  const v = Number(c.req.header('connect-timeout-ms'))
  return Number.isFinite(v) && v > 0 ? v : undefined
}

/** Runs a unary handler: its result as the JSON response, anything thrown as a Connect error. */
export async function unary(c: Context<AppEnv>, fn: () => Promise<unknown>): Promise<Response> {
  try {
    return c.json((await fn()) ?? {}, 200)
  } catch (err) {
    const { status, body } = errorOf(c, err, connectErrors)
    return Response.json(body, { status })
  }
}

/** A unary method of an envd service: `fn` gets the checked call and the checked request message. */
export function sandboxUnary<T extends z.ZodType>(
  schema: T,
  fn: (call: SandboxCall, req: z.output<T>) => Promise<unknown>,
) {
  return (c: Context<AppEnv>) => unary(c, async () => fn(await sandboxCall(c), await unaryRequest(c, schema)))
}

/** A server-streaming method of an envd service: the caller is checked before the request message is read. */
export function sandboxStream<T extends z.ZodType>(
  schema: T,
  keepalive: unknown,
  fn: (c: Context<AppEnv>, call: SandboxCall, req: z.output<T>, out: ServerStream) => Promise<void>,
) {
  return (c: Context<AppEnv>) =>
    serverStream(c, keepalive, async (out) => {
      const call = await sandboxCall(c)
      return fn(c, call, await streamRequest(c, schema), out)
    })
}

/** A failure that means the sandbox ended under the call (killed, or died): envd's connection would drop with it. */
export function sandboxEnded(err: unknown): boolean {
  return err instanceof AppError && (err.code === 'SANDBOX_NOT_RUNNING' || err.code === 'SANDBOX_ERRORED')
}

/**
 * Ends a streamed response the way envd's does when its sandbox dies: the connection drops, no
 * last message. The E2B clients then ask whether the sandbox still runs and, as it does not, say
 * it was killed or reached its end of life.
 */
export function dropConnection(c: Context<AppEnv>): void {
  // from the Node server; under app.request() (tests) the body just ends without its last message
  c.env?.outgoing?.destroy()
}

export interface ServerStream {
  send(msg: unknown): Promise<void>
  /** Aborted when the client goes away (or its deadline passes). */
  signal: AbortSignal
}

/**
 * A server-streaming response. `work` sends messages (each write awaited: a slow client holds the
 * work back); what it throws ends the stream as a Connect error. `keepalive` is sent every
 * `Keepalive-Ping-Interval` seconds the client asked for, so proxies keep a quiet stream open.
 */
export function serverStream(
  c: Context<AppEnv>,
  keepalive: unknown,
  work: (out: ServerStream) => Promise<void>,
): Response {
  c.header('content-type', 'application/connect+json')
  const intervalSeconds = Number(c.req.header('keepalive-ping-interval'))
  return stream(c, async (s) => {
    const aborted = new AbortController()
    s.onAbort(() => aborted.abort())
    const send = (msg: unknown) => s.write(envelope(0, msg)).then(() => {})
    const timer =
      Number.isFinite(intervalSeconds) && intervalSeconds > 0
        ? setInterval(() => void send(keepalive).catch(() => {}), intervalSeconds * 1000)
        : undefined
    let end: Record<string, unknown> = {}
    try {
      await work({ send, signal: aborted.signal })
    } catch (err) {
      if (sandboxEnded(err)) {
        clearInterval(timer)
        return dropConnection(c)
      }
      end = { error: errorOf(c, err, connectErrors).body }
    } finally {
      clearInterval(timer)
    }
    if (!aborted.signal.aborted) await s.write(envelope(END_STREAM, end)).catch(() => {})
  })
}
