import { CreateSnapshotRequest, Snapshot } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import { jsonBody } from '../../e2b/json-body.ts'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/snapshots',
  tags: tagged('Snapshots'),
  summary:
    'Snapshot a running sandbox (memory, processes, disk); it pauses briefly and carries on. A `name` moves to it from the snapshot that had it',
  security,
  // the body is optional, also with a JSON content type and nothing in it: read by the handler
  request: { params: SandboxIdParam },
  responses: {
    201: { description: 'Snapshot', content: { 'application/json': { schema: Snapshot } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const body = await jsonBody(c, CreateSnapshotRequest)
    return c.json(
      await c.var.services.sandboxes.snapshot(c.var.principal.keyId, c.req.valid('param').id, { name: body.name }),
      201,
    )
  })
}
