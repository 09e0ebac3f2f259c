import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/sandboxes/{id}',
  summary: 'Kill a sandbox (returns at once; idempotent)',
  security,
  request: { params: SandboxIdParam },
  responses: { 204: { description: 'Killed' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, (c) => {
    c.var.services.sandboxes.kill(c.var.principal.keyId, c.req.valid('param').id)
    return c.body(null, 204)
  })
}
