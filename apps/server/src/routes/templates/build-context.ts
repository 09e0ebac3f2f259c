import { TemplateBuild } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { uploadBody } from '../../http/upload.ts'
import { parseOrThrow } from '../../http/validate.ts'
import { tagged } from '../tags.ts'
import { BuildIdParam } from './build-get.ts'

const route = createRoute({
  method: 'put',
  path: '/v1/builds/{id}/context',
  tags: tagged('Templates'),
  summary:
    "Upload a waiting build's context (a tar archive), or its image archive (`docker save` output or an OCI layout tarball), as the raw body; the build then starts",
  security,
  request: {
    params: BuildIdParam,
    body: { content: { 'application/x-tar': { schema: z.string().openapi({ format: 'binary' }) } } },
  },
  responses: {
    202: { description: 'The build, queued', content: { 'application/json': { schema: TemplateBuild } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openAPIRegistry.registerPath(route)
  app.put('/v1/builds/:id/context', async (c) => {
    const { id } = parseOrThrow(BuildIdParam, { id: c.req.param('id') })
    const services = c.var.services
    const body = uploadBody(c.req.raw, services.config.maxContextBytes, 'build upload')
    return c.json(await services.templates.uploadContext(c.var.principal.keyId, id, body), 202)
  })
}
