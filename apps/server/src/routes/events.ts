import { AppError, SandboxEvent, sandboxEventTypes } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../http/env.ts'
import { errorResponses, security } from '../http/schemas.ts'
import { sseResponse, wantsEvents } from '../http/sse.ts'
import { tagged } from './tags.ts'

const Query = z.object({
  sandboxId: z.string().max(64).optional(),
  /** Comma-separated event types. */
  type: z.string().max(1024).optional(),
  /** Only events after this event id (resume a stream where it broke off). */
  since: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).default(1000),
})

const route = createRoute({
  method: 'get',
  path: '/v1/events',
  tags: tagged('Events'),
  summary: "Lifecycle events of this key's sandboxes: a list, or (Accept: text/event-stream) past then live",
  description:
    `Types: ${sandboxEventTypes.join(', ')}. Each SSE event is named by its type and carries the event; its SSE id is the ` +
    'event id, so a client resumes with `since`. A client that falls 10,000 events behind is sent `error` and disconnected.',
  security,
  request: { query: Query },
  responses: {
    200: {
      description: 'Events, oldest first',
      content: {
        'application/json': { schema: z.object({ events: z.array(SandboxEvent) }) },
        'text/event-stream': { schema: z.string() },
      },
    },
    ...errorResponses,
  },
})

const MAX_BEHIND = 10_000

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const q = c.req.valid('query')
    const filter = { since: q.since, sandboxId: q.sandboxId, types: q.type?.split(',').filter(Boolean), limit: q.limit }
    const { events } = c.var.services
    if (!wantsEvents(c)) return c.json({ events: (await events.feed(owner, filter)).past }, 200)
    const queue: SandboxEvent[] = []
    let wake: (() => void) | null = null
    const { past, stop } = await events.feed(owner, filter, (e) => {
      queue.push(e)
      wake?.()
    })
    queue.unshift(...past)
    return sseResponse(c, async (emit, signal) => {
      signal.addEventListener('abort', () => wake?.())
      try {
        while (!signal.aborted) {
          const e = queue.shift()
          if (!e) {
            await new Promise<void>((r) => {
              wake = r
            })
            wake = null
            continue
          }
          if (queue.length > MAX_BEHIND)
            throw new AppError(
              'RATE_LIMITED',
              `the client fell ${queue.length} events behind; resume with since=${e.id - 1}`,
            )
          await emit(e.type, e, String(e.id))
        }
        return null
      } finally {
        stop()
      }
    })
  })
}
