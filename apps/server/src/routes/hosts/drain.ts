import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'
import { hostsOf } from './fleet.ts'

const DrainReport = z.object({
  /** Running sandboxes moved live to other hosts (same ids). */
  migrated: z.array(z.string()),
  /** Images (hibernated sandboxes, snapshots) moved to other hosts. */
  moved: z.array(z.string()),
  failed: z.array(z.object({ id: z.string(), code: z.string(), message: z.string() })),
})

const route = createRoute({
  method: 'post',
  path: '/v1/hosts/{id}/drain',
  tags: tagged('Hosts'),
  summary: 'Cordon a host and move everything off it: running sandboxes by live migration, images by copy (admin)',
  security,
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: { description: 'What moved', content: { 'application/json': { schema: DrainReport } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'drain hosts')
    return c.json(await hostsOf(c).drain(c.req.valid('param').id), 200)
  })
}
