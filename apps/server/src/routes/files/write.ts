import { FileEntry, WriteQuery } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { metadataOf } from '../../http/file-metadata.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { uploadBody } from '../../http/upload.ts'
import { parseOrThrow } from '../../http/validate.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'put',
  path: '/v1/sandboxes/{id}/files',
  tags: tagged('Files'),
  summary: 'Write a file from the raw request body (parents are created; replaces atomically)',
  description:
    'User metadata goes with it as `X-Metadata-<key>: <value>` headers (keys: HTTP token characters; ' +
    'values: printable ASCII; at most 64): it replaces what the file had, and comes back with stat and ' +
    '(`metadata=true`) list.',
  security,
  request: {
    params: SandboxIdParam,
    query: WriteQuery,
    body: { content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } } },
  },
  responses: {
    200: { description: 'Written', content: { 'application/json': { schema: FileEntry } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openAPIRegistry.registerPath(route)
  app.put('/v1/sandboxes/:id/files', async (c) => {
    const q = parseOrThrow(WriteQuery, c.req.query())
    const body = uploadBody(c.req.raw, c.var.services.config.maxUploadBytes, 'file')
    const entry = await c.var.services.files.writeFile(c.var.principal.keyId, c.req.param('id'), q.path, body, {
      mode: q.mode,
      user: q.user,
      metadata: metadataOf(c),
    })
    return c.json(entry, 200)
  })
}
