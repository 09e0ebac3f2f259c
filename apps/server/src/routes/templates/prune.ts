import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const PruneRequest = z
  .object({
    /** Keep at most this much of the build layer cache (least recently used layers go first); default: the host's cap. */
    layerCacheMB: z.number().int().min(0).optional(),
  })
  .strict()

const PruneResult = z.object({
  /** What went, as paths in the host's templates dir. */
  removed: z.array(z.string()),
  freedBytes: z.number().int(),
})

const route = createRoute({
  method: 'post',
  path: '/v1/templates/prune',
  tags: tagged('Templates'),
  summary:
    'Admin key only: remove what of the template store nothing uses (rootfs dirs and snapshots of deleted or rebuilt templates, older guests, unused pulled images) and evict build layers down to a size',
  security,
  request: { body: { content: { 'application/json': { schema: PruneRequest } }, required: false } },
  responses: {
    200: { description: 'What was removed', content: { 'application/json': { schema: PruneResult } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'prune the template store')
    const { layerCacheMB } = c.req.valid('json') ?? {}
    const opts = layerCacheMB === undefined ? {} : { layerCacheBytes: layerCacheMB * 1024 * 1024 }
    return c.json(await c.var.services.templates.prune(opts), 200)
  })
}
