// POST /v3/templates: a build id for a template name (`Template.build` in the 2.x clients).
import { z } from 'zod'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import type { E2bApp } from '../route-module.ts'

const BuildRequest = z
  .object({
    name: z.string().max(128).nullish(),
    alias: z.string().max(128).nullish(),
    tags: z.array(z.string()).nullish(),
    cpuCount: z.number().int().min(1).max(64).nullish(),
    memoryMB: z.number().int().min(64).nullish(),
    minFreeDiskMb: z.number().nullish(),
  })
  .passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/v3/templates',
    withApiKey(async (c, owner) => {
      const req = await jsonBody(c, BuildRequest)
      const { templateID, buildID } = await c.var.services.e2bTemplates.request(owner, req)
      return c.json({ templateID, buildID, names: [templateID], aliases: [templateID], tags: [], public: false }, 202)
    }),
  )
}
