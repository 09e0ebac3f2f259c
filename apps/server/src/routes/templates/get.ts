import { TemplateName, UserTemplate } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/templates/{name}',
  summary: 'A template of this key (or a public one) with its builds, newest first',
  security,
  request: { params: z.object({ name: TemplateName }) },
  responses: {
    200: { description: 'Template', content: { 'application/json': { schema: UserTemplate } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(await c.var.services.templates.get(c.var.principal.keyId, c.req.valid('param').name), 200),
  )
}
