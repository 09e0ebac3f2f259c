import { Sandbox } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { sandboxExample } from '../../http/examples.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { actingOwner } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}',
  tags: tagged('Sandboxes'),
  summary: 'Get a sandbox',
  security,
  request: { params: SandboxIdParam },
  responses: {
    200: { description: 'The sandbox', content: { 'application/json': { schema: Sandbox, example: sandboxExample } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id } = c.req.valid('param')
    return c.json(await c.var.services.sandboxes.get(await actingOwner(c, id), id), 200)
  })
}
