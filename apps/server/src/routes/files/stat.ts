import { FileEntry, PathQuery } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/files/stat',
  tags: tagged('Files'),
  summary: 'Stat a path (does not follow a final symlink)',
  security,
  request: { params: SandboxIdParam, query: PathQuery },
  responses: {
    200: { description: 'Entry', content: { 'application/json': { schema: FileEntry } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const q = c.req.valid('query')
    const entry = await c.var.services.files.stat(c.var.principal.keyId, c.req.valid('param').id, {
      path: q.path,
      user: q.user,
    })
    return c.json(FileEntry.parse(entry), 200)
  })
}
