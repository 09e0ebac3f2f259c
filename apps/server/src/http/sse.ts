// Server-Sent Events for a piece of work that produces events: each write is awaited, so a slow
// client holds the work back (flow control reaches the command in the sandbox) instead of
// piling events up in memory. The client going away aborts the work.
import type { Context } from 'hono'
import { streamSSE } from 'hono/streaming'
import type { AppEnv } from './env.ts'
import { errorBody } from './errors.ts'

export type Emit = (event: string, data: unknown, id?: string) => Promise<void>

const KEEPALIVE_MS = 15_000

export function sseResponse(
  c: Context<AppEnv>,
  work: (emit: Emit, signal: AbortSignal) => Promise<{ event: string; data: unknown } | null>,
): Response {
  return streamSSE(c, async (stream) => {
    const aborted = new AbortController()
    stream.onAbort(() => aborted.abort())
    const emit: Emit = async (event, data, id) => {
      await stream.write(sseEvent(event, JSON.stringify(data), id))
    }
    // a comment now and then keeps proxies from closing a quiet stream
    const keepalive = setInterval(() => void stream.write(': keepalive\n\n').catch(() => {}), KEEPALIVE_MS)
    try {
      const end = await work(emit, aborted.signal)
      if (end) await emit(end.event, end.data)
    } catch (err) {
      if (!aborted.signal.aborted) await emit('error', errorBody(c, err)).catch(() => {})
    } finally {
      clearInterval(keepalive)
    }
  })
}

/**
 * One event, encoded once. `json` is JSON.stringify's output, which never holds a CR or LF, so it
 * is one `data:` line (hono's writeSSE splits it by a regex and joins strings again: a third of the
 * server's CPU when a command streams at full speed).
 */
export function sseEvent(event: string, json: string, id?: string): Buffer {
  return Buffer.from(`event: ${event}\n${id === undefined ? '' : `id: ${id}\n`}data: ${json}\n\n`, 'utf8')
}

/** Whether the client asked for an event stream. */
export function wantsEvents(c: Context<AppEnv>): boolean {
  return (c.req.header('accept') ?? '').includes('text/event-stream')
}
