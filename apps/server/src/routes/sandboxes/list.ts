import { SandboxList, SandboxState } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes',
  tags: tagged('Sandboxes'),
  summary:
    "List the key's sandboxes; `metadata.KEY=VALUE` query pairs filter by metadata; an admin key may pass `owner` (a key id, or `*` for all)",
  security,
  request: {
    query: z
      .object({
        state: SandboxState.optional(),
        /** Admin only: another key's sandboxes, or `*` for every key's. */
        owner: z.string().min(1).max(64).optional(),
      })
      .passthrough(),
  },
  responses: {
    200: { description: 'Sandboxes', content: { 'application/json': { schema: SandboxList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const metadata: Record<string, string> = {}
    for (const [k, v] of Object.entries(c.req.query())) if (k.startsWith('metadata.')) metadata[k.slice(9)] = v
    const { state, owner } = c.req.valid('query')
    if (owner !== undefined) requireAdmin(c, "list other keys' sandboxes")
    const sandboxes = await c.var.services.sandboxes.list(owner === '*' ? null : (owner ?? c.var.principal.keyId), {
      state,
      metadata,
    })
    return c.json({ sandboxes }, 200)
  })
}
