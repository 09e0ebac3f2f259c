import { ApiKeyInfo, AppError, UpdateKeyRequest } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { requireAdmin } from './admin.ts'

const route = createRoute({
  method: 'patch',
  path: '/v1/keys/{id}',
  tags: tagged('Keys'),
  summary:
    'Change an API key (admin): its name, scopes, quotas, rate limits or expiry; each given replaces what was (`{}` clears it), `expiresAt: null` ends the expiry',
  security,
  request: {
    params: z.object({ id: z.string().min(1).max(64) }),
    body: { content: { 'application/json': { schema: UpdateKeyRequest } }, required: true },
  },
  responses: {
    200: { description: 'The key as changed', content: { 'application/json': { schema: ApiKeyInfo } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'change keys')
    const { id } = c.req.valid('param')
    const change = c.req.valid('json')
    // the admin key keeps what lets it manage the rest
    if (id === c.var.principal.keyId && (change.scopes || change.expiresAt))
      throw new AppError('VALIDATION_FAILED', 'an admin key cannot limit its own scopes or expiry')
    return c.json(await c.var.services.keys.update(id, change), 200)
  })
}
