import { PidParam, ProcessOutputQuery } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { sseResponse } from '../../http/sse.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/processes/{pid}/output',
  tags: tagged('Processes'),
  summary: "Stream a background process's output (from `offset`) and its exit, as Server-Sent Events",
  description:
    'Events: `stdout` / `stderr` ({data}), `gap` ({bytes}: output dropped from the bounded log before this reader got it), ' +
    'then `exit` ({exitCode, signal, timedOut, durationMs, offset}). Closing the stream detaches; the process runs on. ' +
    'Any number of readers may attach, each at its own pace.',
  security,
  request: { params: SandboxIdParam.merge(PidParam), query: ProcessOutputQuery },
  responses: {
    200: { description: 'The output', content: { 'text/event-stream': { schema: z.string() } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const { id, pid } = c.req.valid('param')
    const { offset, encoding } = c.req.valid('query')
    await c.var.services.sandboxes.check(owner, id)
    return sseResponse(c, async (emit, signal) => {
      const exit = await c.var.services.exec.attach(
        owner,
        id,
        pid,
        { offset, encoding, output: true },
        {
          stdout: (data) => emit('stdout', { data }),
          stderr: (data) => emit('stderr', { data }),
          gap: (bytes) => emit('gap', { bytes }),
        },
        signal,
      )
      return exit ? { event: 'exit', data: exit } : null
    })
  })
}
