import { TemplateName } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/templates/{name}',
  tags: tagged('Templates'),
  summary: 'Delete a template of this key: its builds stop, its versions go; sandboxes running from it carry on',
  security,
  request: { params: z.object({ name: TemplateName }) },
  responses: { 204: { description: 'Deleted' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    await c.var.services.templates.delete(c.var.principal.keyId, c.req.valid('param').name)
    return c.body(null, 204)
  })
}
