import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const SandboxMetrics = z.object({
  /** One sample every 5 s while running, the last 10 minutes. CPU seconds are cumulative. */
  samples: z.array(
    z.object({
      at: z.string(),
      cpuSeconds: z.number(),
      memoryBytes: z.number(),
      networkRxBytes: z.number(),
      networkTxBytes: z.number(),
    }),
  ),
  /** Bytes used in /work, /home and /tmp now (null when the sandbox is not running). */
  diskBytes: z.number().nullable(),
  diskLimitBytes: z.number(),
})

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/metrics',
  tags: tagged('Metrics'),
  summary: "The sandbox's recent CPU and memory use, and its disk use now",
  security,
  request: { params: SandboxIdParam },
  responses: {
    200: { description: 'Metrics', content: { 'application/json': { schema: SandboxMetrics } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const { id } = c.req.valid('param')
    const info = await c.var.services.sandboxes.get(owner, id)
    const diskBytes = info.state === 'running' ? await c.var.services.files.diskUsage(owner, id) : null
    return c.json(
      {
        samples: c.var.services.metrics.samplesOf(id),
        diskBytes,
        diskLimitBytes: info.resources.diskMB * 1024 * 1024,
      },
      200,
    )
  })
}
