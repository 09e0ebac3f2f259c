import { UserTemplate } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { requireAdmin } from '../keys/admin.ts'
import { tagged } from '../tags.ts'

const PublishRequest = z.object({
  public: z.boolean(),
  /** The ready version to approve (default: the newest ready one now); ignored when unpublishing. */
  version: z.number().int().positive().optional(),
})

const route = createRoute({
  method: 'put',
  path: '/v1/templates/by-id/{id}/public',
  tags: tagged('Templates'),
  summary:
    "Admin key only: publish a key's template at one ready version (every key can list and create from that version, not the owner's later builds) or make it private again",
  description:
    'Publishing approves `version`, else the newest ready build now; a build the owner makes afterwards stays ' +
    'private until the admin publishes again. `public: false` unpublishes.',
  security,
  request: {
    params: z.object({ id: z.string().regex(/^tpl-[0-9a-f]{12}$/) }),
    body: { content: { 'application/json': { schema: PublishRequest } }, required: true },
  },
  responses: {
    200: { description: 'Template', content: { 'application/json': { schema: UserTemplate } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    requireAdmin(c, 'make a template public')
    const { public: value, version } = c.req.valid('json')
    return c.json(
      await c.var.services.templates.setPublic(c.var.principal, c.req.valid('param').id, value, version),
      200,
    )
  })
}
