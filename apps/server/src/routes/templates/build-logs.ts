import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { sseResponse } from '../../http/sse.ts'
import { tagged } from '../tags.ts'
import { BuildIdParam } from './build-get.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/builds/{id}/logs',
  tags: tagged('Templates'),
  summary:
    "A template build's log as Server-Sent Events, live until the build ends; its template's owner and the admin key only",
  description:
    'One `log` event per line ({seq, at, step, stream, message}; the event id is its seq), then one `end` ' +
    '(the build as it ended: status ready or failed, with its error). Resumable: `Last-Event-ID` (or `?offset=`) ' +
    'starts after that line.',
  security,
  request: { params: BuildIdParam, query: z.object({ offset: z.coerce.number().int().min(0).optional() }) },
  responses: {
    200: {
      description: 'log events, then end',
      content: { 'text/event-stream': { schema: z.string().openapi({ description: 'log events, then end' }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const who = c.var.principal
    const { id } = c.req.valid('param')
    const templates = c.var.services.templates
    const lastId = Number(c.req.header('last-event-id'))
    const from = Number.isInteger(lastId) && lastId >= 0 ? lastId + 1 : (c.req.valid('query').offset ?? 0)
    await templates.getBuild(who, id)
    return sseResponse(c, async (emit, signal) => {
      const end = await templates.follow(who, id, from, (e) => emit('log', e, String(e.seq)), signal)
      return { event: 'end', data: end }
    })
  })
}
