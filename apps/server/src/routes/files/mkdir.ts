import { FileEntry, MakeDirRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/files/mkdir',
  tags: tagged('Files'),
  summary: 'Create a directory and its parents (no error if it exists)',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: MakeDirRequest } }, required: true },
  },
  responses: {
    200: { description: 'Entry', content: { 'application/json': { schema: FileEntry } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const b = c.req.valid('json')
    const entry = await c.var.services.files.mkdir(c.var.principal.keyId, c.req.valid('param').id, {
      path: b.path,
      user: b.user,
    })
    return c.json(FileEntry.parse(entry), 200)
  })
}
