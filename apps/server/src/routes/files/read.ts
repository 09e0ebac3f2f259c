import { PathQuery } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { parseOrThrow } from '../../http/validate.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/files',
  tags: tagged('Files'),
  summary: 'Read a regular file as raw bytes (streamed; no Content-Length when its size is unknown, e.g. procfs)',
  security,
  request: { params: SandboxIdParam, query: PathQuery },
  responses: {
    200: {
      description: 'File bytes',
      content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } },
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openAPIRegistry.registerPath(route)
  app.get('/v1/sandboxes/:id/files', async (c) => {
    const q = parseOrThrow(PathQuery, c.req.query())
    const { size, stream } = await c.var.services.files.readFile(
      c.var.principal.keyId,
      c.req.param('id'),
      q.path,
      q.user,
    )
    // a file whose size the kernel does not know (procfs, sysfs) goes chunked, without a length
    const length: Record<string, string> = size === null ? {} : { 'content-length': String(size) }
    return new Response(stream, {
      headers: {
        'content-type': 'application/octet-stream',
        ...length,
        'x-request-id': c.var.requestId,
      },
    })
  })
}
