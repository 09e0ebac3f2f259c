import { ForkRequest, ForkResult } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { forkExample } from '../../http/examples.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/fork',
  tags: tagged('Sandboxes'),
  summary: '`count` new sandboxes from the live state (memory, processes, disk); the original carries on',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: ForkRequest, example: forkExample } }, required: false },
  },
  responses: {
    201: { description: 'The forks', content: { 'application/json': { schema: ForkResult } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const body = c.req.valid('json') ?? ForkRequest.parse({})
    const sandboxes = await c.var.services.sandboxes.fork(c.var.principal.keyId, c.req.valid('param').id, body)
    return c.json({ sandboxes }, 201)
  })
}
