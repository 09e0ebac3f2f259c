import { ExecRequest, ExecResult } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/exec',
  summary: 'Run a command and wait for it (string: via bash -c; array: exec directly)',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: ExecRequest } }, required: true },
  },
  responses: {
    200: { description: 'The command finished', content: { 'application/json': { schema: ExecResult } } },
    408: {
      description: 'EXEC_TIMEOUT: killed at its timeout; partial output in details',
      content: errorResponses[400].content,
    },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const result = await c.var.services.sandboxes.exec(
      c.var.principal.keyId,
      c.req.valid('param').id,
      c.req.valid('json'),
      c.req.raw.signal,
    )
    return c.json(result, 200)
  })
}
