import { ApiKeyInfo } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { selfOrAdmin } from './admin.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/keys/{id}',
  tags: tagged('Keys'),
  summary: 'An API key: its scopes, quotas, rate limits and expiry (admin, or the key itself; `me` is the caller)',
  security,
  request: { params: z.object({ id: z.string().min(1).max(64) }) },
  responses: {
    200: { description: 'The key', content: { 'application/json': { schema: ApiKeyInfo } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const id = selfOrAdmin(c, c.req.valid('param').id, 'read')
    return c.json(await c.var.services.keys.get(id), 200)
  })
}
