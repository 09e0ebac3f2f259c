import { type CodeResult, Execution, ExecutionError, RunCodeRequest } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import { streamSSE } from 'hono/streaming'
import type { App } from '../../http/env.ts'
import { errorBody } from '../../http/errors.ts'
import { executionExample, runCodeExample } from '../../http/examples.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { sseEvent } from '../../http/sse.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/code',
  tags: tagged('Code'),
  summary: 'Run a code cell in a persistent interpreter (Accept: text/event-stream streams it)',
  description:
    "Runs `code` in a code context (the language's default one unless `contextId` names another): variables, imports and files persist between cells. " +
    'With `Accept: text/event-stream` the response is Server-Sent Events: `stdout` and `stderr` ({text}), `result` (a CodeResult), then one `end` ' +
    '({error, executionCount, timedOut, truncated, durationMs}) or `error` (an error body).',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: RunCodeRequest, example: runCodeExample } }, required: true },
  },
  responses: {
    200: {
      description: 'The cell finished (an exception in it is `error`, not an HTTP error)',
      content: {
        'application/json': { schema: Execution, example: executionExample },
        'text/event-stream': { schema: z.string().openapi({ description: 'stdout, stderr, result, end events' }) },
      },
    },
    ...errorResponses,
  },
})

const End = z.object({
  error: ExecutionError.nullable(),
  executionCount: z.number().nullable(),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  durationMs: z.number(),
})
type Event = { event: 'stdout' | 'stderr'; data: { text: string } } | { event: 'result'; data: CodeResult }

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const id = c.req.valid('param').id
    const body = c.req.valid('json')
    const code = c.var.services.code
    if (!(c.req.header('accept') ?? '').includes('text/event-stream')) {
      return c.json(await code.run(owner, id, body, {}, c.req.raw.signal), 200)
    }
    const queue: Event[] = []
    let wake: (() => void) | null = null
    const push = (e: Event) => {
      queue.push(e)
      wake?.()
    }
    const run = code.run(
      owner,
      id,
      body,
      {
        stdout: (text) => push({ event: 'stdout', data: { text } }),
        stderr: (text) => push({ event: 'stderr', data: { text } }),
        result: (r) => push({ event: 'result', data: r }),
      },
      c.req.raw.signal,
    )
    let settled = false
    run.then(
      () => {
        settled = true
        wake?.()
      },
      () => {
        settled = true
        wake?.()
      },
    )
    // a request that fails at once (no such sandbox, not running) gets a plain error response
    await Promise.race([run.catch(() => {}), new Promise((r) => setTimeout(r, 0))])
    if (settled && queue.length === 0) await run.catch((err) => Promise.reject(err))
    return streamSSE(c, async (stream) => {
      while (true) {
        const e = queue.shift()
        if (e) {
          await stream.write(sseEvent(e.event, JSON.stringify(e.data)))
          continue
        }
        if (settled) break
        await new Promise<void>((r) => {
          wake = r
        })
        wake = null
      }
      try {
        const { results: _r, logs: _l, ...end } = await run
        await stream.write(sseEvent('end', JSON.stringify(End.parse(end))))
      } catch (err) {
        await stream.write(sseEvent('error', JSON.stringify(errorBody(c, err))))
      }
    })
  })
}
