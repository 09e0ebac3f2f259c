import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../http/env.ts'
import { errorResponses, security } from '../http/schemas.ts'
import { requireAdmin } from './keys/admin.ts'
import { tagged } from './tags.ts'

const route = createRoute({
  method: 'get',
  path: '/metrics',
  tags: tagged('Metrics'),
  summary:
    'Prometheus metrics of the whole host (admin key): sandboxes by state, latencies, pool, errors, per-sandbox CPU and memory',
  security,
  responses: {
    200: { description: 'Prometheus text format', content: { 'text/plain': { schema: z.string() } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'read host metrics')
    const registry = c.var.services.metrics.registry
    return c.text(await registry.metrics(), 200, { 'content-type': registry.contentType })
  })
}
