import { TemplateName, UserTemplate } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/templates/{name}',
  tags: tagged('Templates'),
  summary:
    'A template of this key (or a public one, at its published version); its builds, newest first, for its owner and the admin key only',
  security,
  request: { params: z.object({ name: TemplateName }) },
  responses: {
    200: { description: 'Template', content: { 'application/json': { schema: UserTemplate } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(await c.var.services.templates.get(c.var.principal, c.req.valid('param').name), 200),
  )
}
