import { PidParam, ProcessInfo, ProcessSignalRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/processes/{pid}/signal',
  tags: tagged('Processes'),
  summary: 'Send a signal to a background process and its process group (default SIGTERM)',
  security,
  request: {
    params: SandboxIdParam.merge(PidParam),
    body: { content: { 'application/json': { schema: ProcessSignalRequest } }, required: true },
  },
  responses: {
    200: { description: 'The process after the signal', content: { 'application/json': { schema: ProcessInfo } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id, pid } = c.req.valid('param')
    const info = await c.var.services.exec.signal(c.var.principal.keyId, id, pid, c.req.valid('json').signal)
    return c.json(info, 200)
  })
}
