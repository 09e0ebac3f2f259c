import { CodeContext, ContextId } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/code/contexts/{contextId}/restart',
  tags: tagged('Code'),
  summary: 'Restart a code context: a fresh interpreter, same cwd and env (a running cell is ended)',
  security,
  request: { params: SandboxIdParam.extend({ contextId: ContextId }) },
  responses: {
    200: { description: 'Restarted', content: { 'application/json': { schema: CodeContext } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id, contextId } = c.req.valid('param')
    return c.json(await c.var.services.code.restartContext(c.var.principal.keyId, id, contextId), 200)
  })
}
