import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { actingOwner } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/sandboxes/{id}',
  tags: tagged('Sandboxes'),
  summary: "Kill a sandbox (returns at once; idempotent); an admin key may kill any tenant's",
  security,
  request: { params: SandboxIdParam },
  responses: { 204: { description: 'Killed' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id } = c.req.valid('param')
    await c.var.services.sandboxes.kill(await actingOwner(c, id), id)
    return c.body(null, 204)
  })
}
