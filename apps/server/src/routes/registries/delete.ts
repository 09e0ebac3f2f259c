import { AppError } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'
import { RegistryParam } from './schemas.ts'

const route = createRoute({
  method: 'delete',
  path: '/v1/registries/{registry}',
  tags: tagged('Registries'),
  summary: "Forget this key's login for a registry",
  security,
  request: { params: RegistryParam },
  responses: { 204: { description: 'Forgotten' }, ...errorResponses },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { registry } = c.req.valid('param')
    if (!(await c.var.services.registries.delete(c.var.principal.keyId, registry)))
      throw new AppError('NOT_FOUND', `no login for ${registry}`)
    return c.body(null, 204)
  })
}
