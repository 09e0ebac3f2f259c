import { HostHeartbeat } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { bearer, hostsOf } from './fleet.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/hosts/{id}/heartbeat',
  tags: tagged('Hosts'),
  summary: "A host's heartbeat with its capacity (bearer: the host's credential)",
  request: {
    params: z.object({ id: z.string() }),
    body: { content: { 'application/json': { schema: HostHeartbeat } }, required: true },
  },
  responses: { 204: { description: 'Recorded' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    await hostsOf(c).heartbeat(c.req.valid('param').id, bearer(c), c.req.valid('json').capacity)
    return c.body(null, 204)
  })
}
