import { SnapshotList } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/snapshots',
  summary: "The key's snapshots, newest first",
  security,
  responses: {
    200: { description: 'Snapshots', content: { 'application/json': { schema: SnapshotList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json({ snapshots: await c.var.services.sandboxes.listSnapshots(c.var.principal.keyId) }, 200),
  )
}
