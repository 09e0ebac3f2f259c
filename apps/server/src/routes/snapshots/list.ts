import { SnapshotList, SnapshotName } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/snapshots',
  tags: tagged('Snapshots'),
  summary: "The key's snapshots, newest first (`?name=`: the one of that name)",
  security,
  request: { query: z.object({ name: SnapshotName.optional() }) },
  responses: {
    200: { description: 'Snapshots', content: { 'application/json': { schema: SnapshotList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(
      {
        snapshots: await c.var.services.sandboxes.listSnapshots(c.var.principal.keyId, {
          name: c.req.valid('query').name,
        }),
      },
      200,
    ),
  )
}
