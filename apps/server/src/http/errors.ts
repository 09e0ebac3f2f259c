// The one error builder: anything thrown becomes an AppError (never a stack trace), counted, and
// goes out with the request id in the shape its entry point speaks (forkbox's own, or E2B's).
import { AppError, type ErrorBody, type ErrorCode, errorStatus } from '@forkbox/protocol'
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import type { z } from 'zod'
import type { AppEnv, ErrorFormat } from './env.ts'

// `source`/`destination`: envd's Move
const PATH_FIELDS: ReadonlySet<string> = new Set(['path', 'from', 'to', 'source', 'destination'])

/** zod failures: a bad path gets its own code, everything else is VALIDATION_FAILED. */
export function validationError(error: z.ZodError): AppError {
  const issues = error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }))
  const first = error.issues[0]
  const code: ErrorCode = first && PATH_FIELDS.has(String(first.path[0])) ? 'INVALID_PATH' : 'VALIDATION_FAILED'
  const summary = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')
  return new AppError(code, summary || 'invalid request', { issues })
}

export type { ErrorFormat } from './env.ts'

/** forkbox's own: `{ error: { code, message, details?, requestId } }` with the code's status. */
export const forkboxErrors: ErrorFormat<ErrorBody> = {
  status: (e) => errorStatus[e.code],
  body: (e, requestId) => ({
    error: { code: e.code, message: e.message, requestId, ...(e.details ? { details: e.details } : {}) },
  }),
}

/** Connection-level failures of the database (refused, dropped, shutting down), not query errors. */
const STORE_DOWN_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  // Postgres: admin shutdown, crash shutdown, cannot connect now, connection failures
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
])

export function storeDown(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string' && STORE_DOWN_CODES.has(code)) return true
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(err.message)
}

/** Anything thrown, as an AppError; what is not one is logged (with the request id) and hidden. */
export function toAppError(c: Context<AppEnv>, err: unknown): AppError {
  let app: AppError
  if (err instanceof AppError) app = err
  // hono's bodyLimit errors the body stream of an upload without a Content-Length
  else if (err instanceof Error && err.name === 'BodyLimitError')
    app = new AppError('PAYLOAD_TOO_LARGE', 'request body is too large')
  else if (err instanceof HTTPException) {
    if (err.status === 413) app = new AppError('PAYLOAD_TOO_LARGE', 'request body is too large')
    else if (err.status === 400 && /json/i.test(err.message))
      app = new AppError('MALFORMED_JSON', 'request body is not valid JSON')
    else app = new AppError(err.status === 404 ? 'NOT_FOUND' : 'VALIDATION_FAILED', err.message || 'bad request')
  } else if (storeDown(err)) {
    c.var.services?.log.warn({ err: String(err), requestId: c.var.requestId }, 'the store is unavailable')
    app = new AppError('STORE_UNAVAILABLE', 'the control plane cannot reach its database; retry shortly')
  } else {
    c.var.services?.log.error({ err, requestId: c.var.requestId }, 'unhandled error')
    app = new AppError('INTERNAL', 'internal error')
  }
  c.var.services?.metrics.errors.inc({ code: app.code })
  return app
}

/** The status and body of `err` in `format` (the entry point's own when not given). */
export function errorOf<B extends object>(
  c: Context<AppEnv>,
  err: unknown,
  format: ErrorFormat<B>,
): { status: number; body: B } {
  const app = toAppError(c, err)
  return { status: format.status(app), body: format.body(app, c.var.requestId ?? '') }
}

/** The error response, in the format the route group chose (`c.var.errorFormat`), forkbox's by default. */
export function errorResponse(c: Context<AppEnv>, err: unknown): Response {
  const { status, body } = errorOf(c, err, c.var.errorFormat ?? forkboxErrors)
  // a rate limit says when to come back; a quota (also 429) does not: waiting does not free it
  const retryMs = err instanceof AppError && err.code === 'RATE_LIMITED' ? err.details?.retryAfterMs : undefined
  if (typeof retryMs === 'number') c.header('Retry-After', String(Math.max(1, Math.ceil(retryMs / 1000))))
  return c.json(body, status as ContentfulStatusCode)
}

/** forkbox's error body for anything thrown (also sent as an SSE `error` event, a terminal's `error`). */
export function errorBody(c: Context<AppEnv>, err: unknown): ErrorBody {
  return errorOf(c, err, forkboxErrors).body
}
