import { RemoveQuery } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/sandboxes/{id}/files',
  tags: tagged('Files'),
  summary: 'Remove a file or directory',
  security,
  request: { params: SandboxIdParam, query: RemoveQuery },
  responses: { 204: { description: 'Removed' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const q = c.req.valid('query')
    await c.var.services.files.remove(c.var.principal.keyId, c.req.valid('param').id, {
      path: q.path,
      recursive: q.recursive === 'true',
      user: q.user,
    })
    return c.body(null, 204)
  })
}
