import { CodeContextList } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/code/contexts',
  tags: tagged('Code'),
  summary: "List a sandbox's code contexts (the default ones appear once used)",
  security,
  request: { params: SandboxIdParam },
  responses: {
    200: { description: 'The contexts', content: { 'application/json': { schema: CodeContextList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const contexts = await c.var.services.code.listContexts(c.var.principal.keyId, c.req.valid('param').id)
    return c.json({ contexts }, 200)
  })
}
