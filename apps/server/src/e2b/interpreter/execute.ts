// POST /execute: runs a cell, streaming newline-delimited JSON (stdout, stderr, result, error,
// number_of_executions, end_of_execution).
import { type CodeResult, RunCodeRequest } from '@forkbox/protocol'
import { stream } from 'hono/streaming'
import { z } from 'zod'
import { toAppError, validationError } from '../../http/errors.ts'
import { dropConnection, sandboxEnded } from '../connect.ts'
import { jsonBody } from '../json-body.ts'
import type { E2bApp } from '../route-module.ts'
import { interpreterHandler } from './handler.ts'
import { language } from './language.ts'

const ExecuteBody = z
  .object({
    code: z.string(),
    context_id: z.string().nullish(),
    language: z.string().nullish(),
    env_vars: z.record(z.string(), z.string()).nullish(),
  })
  .passthrough()

/** forkbox's CodeResult as the interpreter's `result` line; other MIME types go on as their own keys. */
function resultLine(r: CodeResult) {
  const { isMainResult, extra, ...formats } = r
  return { type: 'result', is_main_result: isMainResult, ...formats, ...(extra ?? {}) }
}

export function register(app: E2bApp): void {
  app.post(
    '/execute',
    interpreterHandler(async (c, call) => {
      const body = await jsonBody(c, ExecuteBody)
      const parsed = RunCodeRequest.safeParse({
        code: body.code,
        language: language(body.language),
        contextId: body.context_id ?? undefined,
        envs: body.env_vars ?? undefined,
      })
      if (!parsed.success) throw validationError(parsed.error)
      // what fails before the first line is an HTTP error the client can read
      await call.services.sandboxes.check(call.owner, call.sandboxId)
      c.header('content-type', 'application/x-ndjson')
      return stream(c, async (s) => {
        const aborted = new AbortController()
        s.onAbort(() => aborted.abort())
        // one JSON object a line; the client splits on newlines, so no blank line ever goes out
        const line = (msg: unknown) => void s.write(`${JSON.stringify(msg)}\n`).catch(() => {})
        const timestamp = () => Date.now() * 1000
        try {
          const out = await call.services.code.run(
            call.owner,
            call.sandboxId,
            parsed.data,
            {
              stdout: (text) => line({ type: 'stdout', text, timestamp: timestamp() }),
              stderr: (text) => line({ type: 'stderr', text, timestamp: timestamp() }),
              result: (r) => line(resultLine(r)),
            },
            aborted.signal,
          )
          if (out.error) line({ type: 'error', ...out.error })
          else if (out.timedOut)
            line({ type: 'error', name: 'TimeoutError', value: 'the cell did not finish in time', traceback: '' })
          if (out.executionCount !== null) line({ type: 'number_of_executions', execution_count: out.executionCount })
        } catch (err) {
          if (aborted.signal.aborted) return
          // killed mid-cell: the client reads a dropped connection as "the sandbox was killed"
          if (sandboxEnded(err)) return dropConnection(c)
          const app = toAppError(c, err)
          line({ type: 'error', name: app.code, value: app.message, traceback: '' })
        }
        line({ type: 'end_of_execution' })
      })
    }),
  )
}
