// GET /sandboxes/{id}/metrics: forkbox's usage samples (every 5 s, cumulative CPU seconds) as E2B's
// metrics (CPU % of the sandbox's vCPUs), between ?start and ?end (unix seconds).
import { withApiKey } from '../auth.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'

const MiB = 1024 * 1024

export function register(app: E2bApp): void {
  app.get(
    '/sandboxes/:id/metrics',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      const diskUsed = s.state === 'running' ? await c.var.services.files.diskUsage(owner, s.id) : 0
      const from = (Number(c.req.query('start')) || 0) * 1000
      const to = (Number(c.req.query('end')) || Number.POSITIVE_INFINITY) * 1000
      const samples = c.var.services.metrics.samplesOf(s.id)
      const out = samples.flatMap((x, i) => {
        const at = Date.parse(x.at)
        if (at < from || at > to) return []
        const prev = samples[i - 1]
        const seconds = prev ? (at - Date.parse(prev.at)) / 1000 : 0
        const busy = prev && seconds > 0 ? (x.cpuSeconds - prev.cpuSeconds) / seconds / s.resources.vcpus : 0
        return [
          {
            timestamp: x.at,
            timestampUnix: Math.floor(at / 1000),
            cpuUsedPct: Math.round(Math.max(0, busy) * 10_000) / 100,
            cpuCount: s.resources.vcpus,
            memUsed: x.memoryBytes,
            memTotal: s.resources.memoryMB * MiB,
            memCache: 0,
            diskUsed,
            diskTotal: s.resources.diskMB * MiB,
          },
        ]
      })
      return c.json(out, 200)
    }),
  )
}
