import { AppError, FileEntry, WriteQuery } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { parseOrThrow } from '../../http/validate.ts'

const route = createRoute({
  method: 'put',
  path: '/v1/sandboxes/{id}/files',
  summary: 'Write a file from the raw request body (parents are created; replaces atomically)',
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

/** The request body as chunks, failing once it passes `limit` bytes. */
async function* limited(body: ReadableStream<Uint8Array> | null, limit: number): AsyncGenerator<Uint8Array> {
  if (!body) return
  let total = 0
  const reader = body.getReader()
  for (;;) {
    let next: ReadableStreamReadResult<Uint8Array>
    try {
      next = await reader.read()
    } catch {
      // the client went away mid-body: the guest drops its temp file (an abort), the target stays
      throw new AppError('CANCELLED', 'the upload was cut off before its end')
    }
    const { done, value: chunk } = next
    if (done) return
    total += chunk.length
    if (total > limit) throw new AppError('PAYLOAD_TOO_LARGE', `file is larger than the ${limit}-byte upload limit`)
    yield chunk
  }
}

export function register(app: App): void {
  app.openAPIRegistry.registerPath(route)
  app.put('/v1/sandboxes/:id/files', async (c) => {
    const q = parseOrThrow(WriteQuery, c.req.query())
    const limit = c.var.services.config.maxUploadBytes
    const declared = Number(c.req.header('content-length') ?? 0)
    if (declared > limit) throw new AppError('PAYLOAD_TOO_LARGE', `file is larger than the ${limit}-byte upload limit`)
    const entry = await c.var.services.sandboxes.writeFile(
      c.var.principal.keyId,
      c.req.param('id'),
      q.path,
      limited(c.req.raw.body, limit),
      {
        mode: q.mode,
        user: q.user,
      },
    )
    return c.json(entry, 200)
  })
}
