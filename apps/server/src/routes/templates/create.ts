import { CreateTemplateRequest, TemplateBuild, UserTemplate } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/templates',
  tags: tagged('Templates'),
  summary: 'Build a template (or the next version of one) from an image or a Dockerfile',
  description:
    'Answers at once with the build; follow it at /v1/builds/{id} (or its log, streamed, at /v1/builds/{id}/logs). ' +
    'With `context: true` the build waits for its context tarball: PUT /v1/builds/{id}/context.',
  security,
  request: { body: { content: { 'application/json': { schema: CreateTemplateRequest } }, required: true } },
  responses: {
    202: {
      description: 'The build, queued (or waiting for its context)',
      content: { 'application/json': { schema: z.object({ template: UserTemplate, build: TemplateBuild }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json(await c.var.services.templates.create(c.var.principal.keyId, c.req.valid('json')), 202),
  )
}
