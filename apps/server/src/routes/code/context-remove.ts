import { ContextId } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/sandboxes/{id}/code/contexts/{contextId}',
  tags: tagged('Code'),
  summary: 'Remove a code context and stop its interpreter',
  security,
  request: { params: SandboxIdParam.extend({ contextId: ContextId }) },
  responses: {
    204: { description: 'Removed' },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id, contextId } = c.req.valid('param')
    await c.var.services.code.removeContext(c.var.principal.keyId, id, contextId)
    return c.body(null, 204)
  })
}
