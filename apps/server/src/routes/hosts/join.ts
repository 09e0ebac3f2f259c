import { JoinHostRequest, JoinHostResponse } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { bearer, hostsOf } from './fleet.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/hosts/join',
  tags: tagged('Hosts'),
  summary: 'A host agent joins the fleet (bearer: the join token); answers the host its own credential',
  request: { body: { content: { 'application/json': { schema: JoinHostRequest } }, required: true } },
  responses: {
    200: { description: 'Joined', content: { 'application/json': { schema: JoinHostResponse } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => c.json(await hostsOf(c).join(bearer(c), c.req.valid('json')), 200))
}
