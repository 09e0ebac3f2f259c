import { ExecRequest, ExecResult, ProcessStarted } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { execExample, execResultExample } from '../../http/examples.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { sseResponse, wantsEvents } from '../../http/sse.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/exec',
  tags: tagged('Processes'),
  summary:
    'Run a command (string: via bash -c; array: exec directly): wait for it, stream it, or start it in the background',
  description:
    'Waits and returns an ExecResult; with `Accept: text/event-stream`, streams `stdout` / `stderr` events ({data}, text or base64 per `encoding`) ' +
    'as the command writes, then one `exit` ({exitCode, signal, timedOut, truncated, durationMs}) or `error`. A slow reader slows the command down ' +
    '(flow control), nothing is dropped. With `background: true`, returns {pid} at once: see /processes.',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: ExecRequest, example: execExample } }, required: true },
  },
  responses: {
    200: {
      description: 'The command finished (or, background, started)',
      content: {
        'application/json': { schema: z.union([ExecResult, ProcessStarted]), example: execResultExample },
        'text/event-stream': { schema: z.string().openapi({ description: 'stdout, stderr, exit events' }) },
      },
    },
    ...errorResponses,
    408: {
      description: 'EXEC_TIMEOUT: killed at its timeout; partial output in details',
      content: errorResponses[408].content,
    },
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const id = c.req.valid('param').id
    const body = c.req.valid('json')
    const exec = c.var.services.exec
    if (body.background) return c.json(await exec.start(owner, id, body), 200)
    if (!wantsEvents(c)) return c.json(await exec.exec(owner, id, body, c.req.raw.signal), 200)
    await c.var.services.sandboxes.check(owner, id)
    return sseResponse(c, async (emit, signal) => {
      const end = await exec.stream(
        owner,
        id,
        body,
        { stdout: (data) => emit('stdout', { data }), stderr: (data) => emit('stderr', { data }) },
        signal,
      )
      return { event: 'exit', data: end }
    })
  })
}
