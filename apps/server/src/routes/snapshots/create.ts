import { Snapshot } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/snapshots',
  summary: 'Snapshot a running sandbox (memory, processes, disk); it pauses briefly and carries on',
  security,
  request: { params: SandboxIdParam },
  responses: {
    201: { description: 'Snapshot', content: { 'application/json': { schema: Snapshot } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(await c.var.services.sandboxes.snapshot(c.var.principal.keyId, c.req.valid('param').id), 201),
  )
}
