import { PidParam, ProcessStdinRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/processes/{pid}/stdin',
  tags: tagged('Processes'),
  summary: "Write to a background process's stdin (and optionally close it)",
  security,
  request: {
    params: SandboxIdParam.merge(PidParam),
    body: { content: { 'application/json': { schema: ProcessStdinRequest } }, required: true },
  },
  responses: {
    204: { description: 'Written' },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id, pid } = c.req.valid('param')
    const body = c.req.valid('json')
    const data = Buffer.from(body.data, body.encoding === 'base64' ? 'base64' : 'utf8')
    await c.var.services.exec.stdin(c.var.principal.keyId, id, pid, data, body.eof)
    return c.body(null, 204)
  })
}
