// Turns anything thrown in a handler into the stable error body; never a stack trace.
import { AppError, type ErrorBody, type ErrorCode, errorStatus } from '@forkbox/protocol'
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import type { z } from 'zod'
import type { AppEnv } from './env.ts'

// `source`/`destination`: envd's Move
const PATH_FIELDS = new Set(['path', 'from', 'to', 'source', 'destination'])

/** zod failures: a bad path gets its own code, everything else is VALIDATION_FAILED. */
export function validationError(error: z.ZodError): AppError {
  const issues = error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }))
  const first = error.issues[0]
  const code: ErrorCode = first && PATH_FIELDS.has(String(first.path[0])) ? 'INVALID_PATH' : 'VALIDATION_FAILED'
  const summary = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')
  return new AppError(code, summary || 'invalid request', { issues })
}

export function errorResponse(c: Context<AppEnv>, err: unknown): Response {
  const body = errorBody(c, err)
  c.var.services?.metrics.errors.inc({ code: body.error.code })
  return c.json(body, errorStatus[body.error.code as ErrorCode] as ContentfulStatusCode)
}

/** The stable error body for anything thrown (also sent as an SSE `error` event). */
export function errorBody(c: Context<AppEnv>, err: unknown): ErrorBody {
  let app: AppError
  if (err instanceof AppError) app = err
  else if (err instanceof HTTPException) {
    if (err.status === 413) app = new AppError('PAYLOAD_TOO_LARGE', 'request body is too large')
    else if (err.status === 400 && /json/i.test(err.message))
      app = new AppError('MALFORMED_JSON', 'request body is not valid JSON')
    else app = new AppError(err.status === 404 ? 'NOT_FOUND' : 'VALIDATION_FAILED', err.message || 'bad request')
  } else {
    c.var.services?.log.error({ err, requestId: c.var.requestId }, 'unhandled error')
    app = new AppError('INTERNAL', 'internal error')
  }
  return {
    error: {
      code: app.code,
      message: app.message,
      requestId: c.var.requestId ?? '',
      ...(app.details ? { details: app.details } : {}),
    },
  }
}
