import { Host } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'
import { hostsOf } from './fleet.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/hosts',
  tags: tagged('Hosts'),
  summary: "The fleet's hosts: capacity, load, version, last heartbeat (admin)",
  security,
  responses: {
    200: { description: 'Hosts', content: { 'application/json': { schema: z.object({ hosts: z.array(Host) }) } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'see hosts')
    return c.json({ hosts: await hostsOf(c).list() }, 200)
  })
}
