import { ApiKeyInfo } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { requireAdmin } from './admin.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/keys',
  tags: tagged('Keys'),
  summary: 'List API keys (admin)',
  security,
  responses: {
    200: { description: 'Keys', content: { 'application/json': { schema: z.object({ keys: z.array(ApiKeyInfo) }) } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c)
    return c.json({ keys: await c.var.services.keys.list() }, 200)
  })
}
