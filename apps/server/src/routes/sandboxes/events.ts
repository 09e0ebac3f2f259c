import { SandboxEvent } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const Events = z.object({
  events: z.array(SandboxEvent.pick({ type: true, at: true, detail: true })),
})

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/events',
  tags: tagged('Events'),
  summary: "The sandbox's recorded state transitions, oldest first",
  security,
  request: { params: SandboxIdParam },
  responses: { 200: { description: 'Events', content: { 'application/json': { schema: Events } } }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json({ events: await c.var.services.events.events(c.var.principal.keyId, c.req.valid('param').id) }, 200),
  )
}
