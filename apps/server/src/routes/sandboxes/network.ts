import { NetworkOptions, Sandbox } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'patch',
  path: '/v1/sandboxes/{id}/network',
  tags: tagged('Sandboxes'),
  summary: 'Change what a sandbox may reach and which ports it exposes (fields not given stay as they are)',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: NetworkOptions } }, required: true },
  },
  responses: {
    200: {
      description: 'The sandbox, with the policy now in force',
      content: { 'application/json': { schema: Sandbox } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(
      await c.var.services.sandboxes.updateNetwork(c.var.principal.keyId, c.req.valid('param').id, c.req.valid('json')),
      200,
    ),
  )
}
