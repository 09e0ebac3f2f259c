import { CreateSandboxRequest, Sandbox } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { createSandboxExample, sandboxExample } from '../../http/examples.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes',
  tags: tagged('Sandboxes'),
  summary: 'Create a sandbox; answers once its guest is ready',
  security,
  request: {
    body: {
      content: { 'application/json': { schema: CreateSandboxRequest, example: createSandboxExample } },
      required: false,
    },
  },
  responses: {
    201: { description: 'Created', content: { 'application/json': { schema: Sandbox, example: sandboxExample } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid('json') ?? CreateSandboxRequest.parse({})
    const sbx = await c.var.services.sandboxes.create(c.var.principal.keyId, body, c.req.raw.signal)
    return c.json(sbx, 201)
  })
}
