import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { RegistryLogin, RegistryParam } from './schemas.ts'

const route = createRoute({
  method: 'put',
  path: '/v1/registries/{registry}',
  tags: tagged('Registries'),
  summary:
    "Set this key's login for a registry its templates pull from (the password is kept sealed and never returned)",
  security,
  request: {
    params: RegistryParam,
    body: {
      content: {
        'application/json': {
          schema: z.object({ username: z.string().min(1).max(256), password: z.string().min(1).max(4096) }),
        },
      },
      required: true,
    },
  },
  responses: {
    200: { description: 'The login, without its password', content: { 'application/json': { schema: RegistryLogin } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { username, password } = c.req.valid('json')
    const login = await c.var.services.registries.put(
      c.var.principal.keyId,
      c.req.valid('param').registry,
      username,
      password,
    )
    return c.json(login, 200)
  })
}
