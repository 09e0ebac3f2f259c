// The E2B code interpreter's API (port 49999) over forkbox's CodeService: POST /execute streams
// newline-delimited JSON (stdout, stderr, result, error, number_of_executions,
// end_of_execution), and /contexts creates, lists, restarts and removes code contexts.
import { AppError, type CODE_LANGUAGES, type CodeContext, type CodeResult, RunCodeRequest } from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import { stream } from 'hono/streaming'
import { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { toAppError, validationError } from '../http/errors.ts'
import { dropConnection, sandboxEnded } from './connect.ts'
import { jsonBody } from './json-body.ts'
import { INTERPRETER_PORT, type SandboxCall, sandboxCall } from './sandbox-call.ts'

const LANGUAGES: Record<string, (typeof CODE_LANGUAGES)[number]> = {
  python: 'python',
  py: 'python',
  bash: 'bash',
  sh: 'bash',
  javascript: 'javascript',
  js: 'javascript',
  typescript: 'typescript',
  ts: 'typescript',
}

function language(name: string | undefined | null) {
  if (!name) return undefined
  const l = LANGUAGES[name.toLowerCase()]
  if (!l)
    throw new AppError(
      'VALIDATION_FAILED',
      `language ${name} is not available (python, bash, javascript, typescript are)`,
    )
  return l
}

const ExecuteBody = z
  .object({
    code: z.string(),
    context_id: z.string().nullish(),
    language: z.string().nullish(),
    env_vars: z.record(z.string(), z.string()).nullish(),
  })
  .passthrough()
const ContextBody = z.object({ language: z.string().nullish(), cwd: z.string().nullish() }).passthrough()

/** forkbox's CodeResult as the interpreter's `result` line; other MIME types go on as their own keys. */
function resultLine(r: CodeResult) {
  const { isMainResult, extra, ...formats } = r
  return { type: 'result', is_main_result: isMainResult, ...formats, ...(extra ?? {}) }
}

const context = (ctx: CodeContext) => ({ id: ctx.id, language: ctx.language, cwd: ctx.cwd ?? '' })

async function execute(c: Context<AppEnv>, call: SandboxCall): Promise<Response> {
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
}

async function createContext(c: Context<AppEnv>, call: SandboxCall): Promise<Response> {
  const body = await jsonBody(c, ContextBody)
  const ctx = await call.services.code.createContext(call.owner, call.sandboxId, {
    language: language(body.language) ?? 'python',
    cwd: body.cwd ?? undefined,
  })
  return c.json(context(ctx), 200)
}

async function listContexts(c: Context<AppEnv>, call: SandboxCall): Promise<Response> {
  return c.json((await call.services.code.listContexts(call.owner, call.sandboxId)).map(context), 200)
}

async function restartContext(c: Context<AppEnv>, call: SandboxCall): Promise<Response> {
  await call.services.code.restartContext(call.owner, call.sandboxId, c.req.param('id') as string)
  return c.body(null, 204)
}

async function removeContext(c: Context<AppEnv>, call: SandboxCall): Promise<Response> {
  await call.services.code.removeContext(call.owner, call.sandboxId, c.req.param('id') as string)
  return c.body(null, 204)
}

/** An interpreter handler (what it throws goes out E2B-shaped: the layer's onError). */
const handle = (fn: (c: Context<AppEnv>, call: SandboxCall) => Promise<Response>) => async (c: Context<AppEnv>) =>
  fn(c, await sandboxCall(c, INTERPRETER_PORT))

export function registerInterpreter(app: Hono<AppEnv>): void {
  app.post('/execute', handle(execute))
  app.post('/contexts', handle(createContext))
  app.get('/contexts', handle(listContexts))
  app.post('/contexts/:id/restart', handle(restartContext))
  app.delete('/contexts/:id', handle(removeContext))
}
