import { SandboxList, SandboxState } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes',
  summary: "List the key's sandboxes; `metadata.KEY=VALUE` query pairs filter by metadata",
  security,
  request: { query: z.object({ state: SandboxState.optional() }).passthrough() },
  responses: {
    200: { description: 'Sandboxes', content: { 'application/json': { schema: SandboxList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, (c) => {
    const metadata: Record<string, string> = {}
    for (const [k, v] of Object.entries(c.req.query())) if (k.startsWith('metadata.')) metadata[k.slice(9)] = v
    const sandboxes = c.var.services.sandboxes.list(c.var.principal.keyId, {
      state: c.req.valid('query').state,
      metadata,
    })
    return c.json({ sandboxes }, 200)
  })
}
