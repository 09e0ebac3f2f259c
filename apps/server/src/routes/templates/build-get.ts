import { BuildLogEntry, TemplateBuild } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

export const BuildIdParam = z.object({ id: z.string().regex(/^bld-[0-9a-f]{20}$/) })

const route = createRoute({
  method: 'get',
  path: '/v1/builds/{id}',
  tags: tagged('Templates'),
  summary:
    "A template build: its status, and its log from `logsOffset` on (poll with the next offset); its template's owner and the admin key only",
  security,
  request: {
    params: BuildIdParam,
    query: z.object({ logsOffset: z.coerce.number().int().min(0).optional() }),
  },
  responses: {
    200: {
      description: 'Build',
      content: { 'application/json': { schema: TemplateBuild.extend({ logs: z.array(BuildLogEntry) }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const who = c.var.principal
    const { id } = c.req.valid('param')
    const build = await c.var.services.templates.getBuild(who, id)
    const logs = await c.var.services.templates.logs(who, id, c.req.valid('query').logsOffset ?? 0)
    return c.json({ ...build, logs }, 200)
  })
}
