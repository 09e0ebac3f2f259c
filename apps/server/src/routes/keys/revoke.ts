import { AppError } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { requireAdmin } from './admin.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/keys/{id}',
  tags: tagged('Keys'),
  summary:
    "Revoke an API key (admin): its sandboxes' access tokens stop working at once; `killSandboxes=true` also kills its sandboxes",
  security,
  request: {
    params: z.object({ id: z.string().min(1).max(64) }),
    query: z.object({ killSandboxes: z.enum(['true', 'false']).optional() }),
  },
  responses: { 204: { description: 'Revoked' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c)
    const { id } = c.req.valid('param')
    if (id === c.var.principal.keyId) throw new AppError('VALIDATION_FAILED', 'a key cannot revoke itself')
    if (!(await c.var.services.keys.revoke(id))) throw new AppError('KEY_NOT_FOUND', `no active key ${id}`)
    if (c.req.valid('query').killSandboxes === 'true') await c.var.services.sandboxes.killAll(id)
    return c.body(null, 204)
  })
}
