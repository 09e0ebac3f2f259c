import { ProcessList } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/processes',
  tags: tagged('Processes'),
  summary: 'Background processes of the sandbox, running and recently ended',
  security,
  request: { params: SandboxIdParam },
  responses: {
    200: { description: 'The processes', content: { 'application/json': { schema: ProcessList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const processes = await c.var.services.exec.list(c.var.principal.keyId, c.req.valid('param').id)
    return c.json({ processes }, 200)
  })
}
