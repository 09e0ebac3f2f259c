import { CreatedKey, RotateKeyRequest } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { selfOrAdmin } from './admin.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/keys/{id}/rotate',
  tags: tagged('Keys'),
  summary:
    'Rotate an API key (admin, or the key itself; `me` is the caller): a new secret, returned only here; the old one still works for `graceSeconds` (default 3600)',
  security,
  request: {
    params: z.object({ id: z.string().min(1).max(64) }),
    body: { content: { 'application/json': { schema: RotateKeyRequest } }, required: false },
  },
  responses: {
    200: { description: 'The new secret', content: { 'application/json': { schema: CreatedKey } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const id = selfOrAdmin(c, c.req.valid('param').id, 'rotate')
    const { graceSeconds } = RotateKeyRequest.parse(c.req.valid('json') ?? {})
    return c.json(await c.var.services.keys.rotate(id, graceSeconds), 200)
  })
}
