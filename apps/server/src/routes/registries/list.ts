import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { RegistryLogin } from './schemas.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/registries',
  tags: tagged('Registries'),
  summary: "This key's registry logins (registries and usernames; never a password)",
  security,
  responses: {
    200: {
      description: 'Logins',
      content: { 'application/json': { schema: z.object({ registries: z.array(RegistryLogin) }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) =>
    c.json({ registries: await c.var.services.registries.list(c.var.principal.keyId) }, 200),
  )
}
