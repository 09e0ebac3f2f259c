import { CodeContext, CreateContextRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/code/contexts',
  tags: tagged('Code'),
  summary: 'Create a code context: an interpreter with its own variables, cwd and env',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: CreateContextRequest } }, required: true },
  },
  responses: {
    201: {
      description: 'Created; its interpreter starts in the background',
      content: { 'application/json': { schema: CodeContext } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const ctx = await c.var.services.code.createContext(
      c.var.principal.keyId,
      c.req.valid('param').id,
      c.req.valid('json'),
    )
    return c.json(ctx, 201)
  })
}
