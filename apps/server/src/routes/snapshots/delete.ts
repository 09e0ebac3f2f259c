import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/snapshots/{id}',
  tags: tagged('Snapshots'),
  summary: 'Delete a snapshot (sandboxes started from it are not affected)',
  security,
  request: { params: z.object({ id: z.string().min(1).max(64) }) },
  responses: { 204: { description: 'Deleted' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    await c.var.services.sandboxes.deleteSnapshot(c.var.principal.keyId, c.req.valid('param').id)
    return c.body(null, 204)
  })
}
