import { FileEntry, RenameRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/files/rename',
  tags: tagged('Files'),
  summary: 'Rename or move a path (parents of the target are created)',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: RenameRequest } }, required: true },
  },
  responses: {
    200: { description: 'The entry at its new path', content: { 'application/json': { schema: FileEntry } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const b = c.req.valid('json')
    const entry = await c.var.services.files.rename(c.var.principal.keyId, c.req.valid('param').id, {
      from: b.from,
      to: b.to,
      user: b.user,
    })
    return c.json(FileEntry.parse(entry), 200)
  })
}
