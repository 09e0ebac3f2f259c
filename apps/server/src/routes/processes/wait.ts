import { PidParam, ProcessExitInfo } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/processes/{pid}/wait',
  tags: tagged('Processes'),
  summary: 'Wait for a background process to exit (at once if it has)',
  security,
  request: { params: SandboxIdParam.merge(PidParam) },
  responses: {
    200: { description: 'How it ended', content: { 'application/json': { schema: ProcessExitInfo } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id, pid } = c.req.valid('param')
    const noop = { stdout: () => {}, stderr: () => {} }
    const exit = await c.var.services.exec.attach(
      c.var.principal.keyId,
      id,
      pid,
      { offset: 0, encoding: 'utf8', output: false },
      noop,
      c.req.raw.signal,
    )
    // null only when the client went away first
    return c.json(exit ?? { exitCode: -1, signal: null, timedOut: false, durationMs: 0, offset: 0 }, 200)
  })
}
