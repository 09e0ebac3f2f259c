import { Host } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'
import { hostsOf } from './fleet.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/hosts/{id}/{action}',
  tags: tagged('Hosts'),
  summary: 'Cordon a host (it takes no new sandboxes; what it runs carries on) or uncordon it (admin)',
  security,
  request: { params: z.object({ id: z.string(), action: z.enum(['cordon', 'uncordon']) }) },
  responses: {
    200: { description: 'The host', content: { 'application/json': { schema: Host } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'cordon hosts')
    const { id, action } = c.req.valid('param')
    return c.json(await hostsOf(c).setState(id, action === 'cordon' ? 'cordoned' : 'ready'), 200)
  })
}
