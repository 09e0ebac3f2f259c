import { FileList, ListQuery } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/files/list',
  tags: tagged('Files'),
  summary: 'List a directory (to `depth` levels)',
  security,
  request: { params: SandboxIdParam, query: ListQuery },
  responses: {
    200: { description: 'Entries', content: { 'application/json': { schema: FileList } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const q = c.req.valid('query')
    const entries = await c.var.services.files.list(c.var.principal.keyId, c.req.valid('param').id, {
      path: q.path,
      depth: q.depth,
      user: q.user,
      metadata: q.metadata === 'true',
    })
    return c.json(FileList.parse({ entries }), 200)
  })
}
