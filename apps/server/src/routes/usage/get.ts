import { AppError, UsageQuery, UsageReport } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { bucketCount, MAX_BUCKETS, usageReport } from '../../store/usage.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/usage',
  tags: tagged('Metrics'),
  summary:
    "What a key used from `from` to `to` (default now), in `hour`, `day` or one `total` bucket: vCPU-seconds and GiB-seconds of memory of its live sandboxes, their egress bytes, GiB-seconds of its snapshots. The caller's own; an admin may ask for another `key` or `all`",
  security,
  request: { query: UsageQuery },
  responses: {
    200: { description: 'Usage', content: { 'application/json': { schema: UsageReport } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const q = c.req.valid('query')
    const { keyId, admin } = c.var.principal
    const key = q.key ?? keyId
    if (key !== keyId && !admin) throw new AppError('FORBIDDEN', "only an admin key can read other keys' usage")
    const now = Date.now()
    const from = Date.parse(q.from)
    const to = q.to ? Date.parse(q.to) : now
    if (!(to > from)) throw new AppError('VALIDATION_FAILED', '`to` must be after `from`')
    if (bucketCount(from, to, q.granularity) > MAX_BUCKETS)
      throw new AppError(
        'VALIDATION_FAILED',
        `at most ${MAX_BUCKETS} buckets: a longer range needs a coarser granularity`,
      )
    const owner = key === 'all' ? null : key
    const periods = await c.var.services.usage.periods(owner, new Date(from), new Date(to))
    return c.json(usageReport(key, periods, from, to, q.granularity, now), 200)
  })
}
