import { AuditPage, AuditQuery } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/audit',
  tags: tagged('Audit'),
  summary:
    "The audit log (admin): every key and admin action (keys, quotas, templates, sandboxes created, killed, forked, snapshotted...) with who, when, from which address and user agent, oldest first; page with `after` = the last page's `next`",
  security,
  request: { query: AuditQuery },
  responses: {
    200: { description: 'Entries', content: { 'application/json': { schema: AuditPage } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'read the audit log')
    return c.json(await c.var.services.audit.list(c.req.valid('query')), 200)
  })
}
