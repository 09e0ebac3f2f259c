// POST /v2/templates/{templateID}/builds/{buildID}: starts a requested build with its steps.
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import type { E2bApp } from '../route-module.ts'
import { E2bBuildStart } from '../template-dockerfile.ts'

export function register(app: E2bApp): void {
  app.post(
    '/v2/templates/:templateID/builds/:buildID',
    withApiKey(async (c, owner) => {
      const req = await jsonBody(c, E2bBuildStart)
      const templateID = c.req.param('templateID') as string
      await c.var.services.e2bTemplates.start(owner, templateID, c.req.param('buildID') as string, req)
      // no body; the clients read one unless told its length is 0
      return c.body(null, 202, { 'content-length': '0' })
    }),
  )
}
