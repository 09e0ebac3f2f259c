import { CreatedKey, CreateKeyRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { requireAdmin } from './admin.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/keys',
  tags: tagged('Keys'),
  summary: 'Create an API key (admin); the secret is returned only here',
  security,
  request: { body: { content: { 'application/json': { schema: CreateKeyRequest } }, required: true } },
  responses: {
    201: { description: 'Created', content: { 'application/json': { schema: CreatedKey } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c)
    const body = c.req.valid('json')
    const { ttlSeconds, ...rest } = body
    const expiresAt = ttlSeconds ? new Date(Date.now() + ttlSeconds * 1000) : null
    return c.json(await c.var.services.keys.create({ ...rest, admin: false, expiresAt }), 201)
  })
}
