import { HibernateRequest, Sandbox } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/hibernate',
  tags: tagged('Sandboxes'),
  summary:
    'Checkpoint and stop a sandbox (no memory held); any later exec or files call wakes it. With keepMemory: false only its disk is kept: it wakes as if booted',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: HibernateRequest } }, required: false },
  },
  responses: {
    200: { description: 'The sandbox, hibernated', content: { 'application/json': { schema: Sandbox } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid('json') ?? HibernateRequest.parse({})
    const sbx = await c.var.services.sandboxes.hibernate(c.var.principal.keyId, c.req.valid('param').id, body)
    return c.json(sbx, 200)
  })
}
