import { UserTemplate } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'

const route = createRoute({
  method: 'put',
  path: '/v1/templates/by-id/{id}/public',
  summary: "Admin key only: make a key's template public (every key can list and create from it) or private again",
  security,
  request: {
    params: z.object({ id: z.string().regex(/^tpl-[0-9a-f]{12}$/) }),
    body: { content: { 'application/json': { schema: z.object({ public: z.boolean() }) } }, required: true },
  },
  responses: {
    200: { description: 'Template', content: { 'application/json': { schema: UserTemplate } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'make a template public')
    return c.json(await c.var.services.templates.setPublic(c.req.valid('param').id, c.req.valid('json').public), 200)
  })
}
