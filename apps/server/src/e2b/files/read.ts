// GET /files: a file's raw bytes, streamed (no Content-Length when its size is unknown, e.g. procfs).
import type { E2bApp } from '../route-module.ts'
import { sandboxCall } from '../sandbox-call.ts'
import { pathOf, userOf } from './query.ts'

export function register(app: E2bApp): void {
  app.get('/files', async (c) => {
    const call = await sandboxCall(c)
    const path = pathOf(c.req.query('path'))
    const file = await call.services.files.readFile(call.owner, call.sandboxId, path, userOf(c, call))
    return new Response(file.stream, {
      headers: {
        'content-type': 'application/octet-stream',
        ...(file.size === null ? {} : { 'content-length': String(file.size) }),
        'content-disposition': `attachment; filename="${encodeURIComponent(path.split('/').pop() ?? 'file')}"`,
      },
    })
  })
}
