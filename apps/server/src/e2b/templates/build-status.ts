// GET /templates/{templateID}/builds/{buildID}/status: the build's status and its log from ?logsOffset.
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.get(
    '/templates/:templateID/builds/:buildID/status',
    withApiKey(async (c, owner) => {
      const offset = Math.max(0, Math.floor(Number(c.req.query('logsOffset')) || 0))
      const templateID = c.req.param('templateID') as string
      const buildID = c.req.param('buildID') as string
      const status = await c.var.services.e2bTemplates.status(owner, templateID, buildID, offset)
      return c.json(status, 200)
    }),
  )
}
