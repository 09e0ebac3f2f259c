import { Sandbox, SetTimeoutRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/timeout',
  tags: tagged('Sandboxes'),
  summary: 'Set the time to live, counted from now',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: SetTimeoutRequest } }, required: true },
  },
  responses: {
    200: { description: 'The sandbox', content: { 'application/json': { schema: Sandbox } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(
      await c.var.services.sandboxes.setTimeout(
        c.var.principal.keyId,
        c.req.valid('param').id,
        c.req.valid('json').ttlSeconds,
      ),
      200,
    ),
  )
}
