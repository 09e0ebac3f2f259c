import { TemplateListing } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/templates',
  tags: tagged('Templates'),
  summary: 'Templates this key can create from: the built-ins, its own (newest ready version) and public ones',
  security,
  responses: {
    200: {
      description: 'Templates',
      content: { 'application/json': { schema: z.object({ templates: z.array(TemplateListing) }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json({ templates: await c.var.services.templates.list(c.var.principal.keyId) }, 200),
  )
}
