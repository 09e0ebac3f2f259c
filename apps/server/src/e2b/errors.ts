// forkbox's errors in the two shapes the E2B clients read: REST `{code: <status>, message}` and
// Connect `{code: "not_found", message}`; forkbox's own stable code travels along as `errorCode`.
import { AppError, type ErrorCode, errorStatus } from '@forkbox/protocol'
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { AppEnv } from '../http/env.ts'

/** Connect protocol codes (connectrpc.com/docs/protocol#error-codes) and their HTTP statuses. */
const connectStatus = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  unauthenticated: 401,
} as const
export type ConnectCode = keyof typeof connectStatus

/** Every forkbox code has its Connect code; a new ErrorCode fails to compile here until it gets one. */
const connectCodeOf = {
  VALIDATION_FAILED: 'invalid_argument',
  INVALID_PATH: 'invalid_argument',
  MALFORMED_JSON: 'invalid_argument',
  UNAUTHENTICATED: 'unauthenticated',
  FORBIDDEN: 'permission_denied',
  NOT_FOUND: 'not_found',
  SANDBOX_NOT_FOUND: 'not_found',
  TEMPLATE_NOT_FOUND: 'not_found',
  KEY_NOT_FOUND: 'not_found',
  SNAPSHOT_NOT_FOUND: 'not_found',
  CONTEXT_NOT_FOUND: 'not_found',
  PROCESS_NOT_FOUND: 'not_found',
  FILE_NOT_FOUND: 'not_found',
  PORT_NOT_EXPOSED: 'not_found',
  EXEC_TIMEOUT: 'deadline_exceeded',
  // the clients read `unavailable` as "the sandbox is not running any more"
  SANDBOX_NOT_RUNNING: 'unavailable',
  SANDBOX_ERRORED: 'unavailable',
  CANCELLED: 'canceled',
  FILE_EXISTS: 'already_exists',
  NOT_A_DIRECTORY: 'invalid_argument',
  IS_A_DIRECTORY: 'invalid_argument',
  NOT_A_REGULAR_FILE: 'invalid_argument',
  DIRECTORY_NOT_EMPTY: 'failed_precondition',
  PERMISSION_DENIED: 'permission_denied',
  PAYLOAD_TOO_LARGE: 'invalid_argument',
  RESOURCE_LIMIT_EXCEEDED: 'invalid_argument',
  EXEC_FAILED: 'invalid_argument',
  // not resource_exhausted: the clients turn that into "rate limit exceeded"
  NO_SPACE: 'internal',
  RATE_LIMITED: 'resource_exhausted',
  NO_CAPACITY: 'unavailable',
  GUEST_ERROR: 'internal',
  PORT_UNREACHABLE: 'unavailable',
  NOT_IMPLEMENTED: 'unimplemented',
  INTERNAL: 'internal',
} as const satisfies Record<ErrorCode, ConnectCode>

/** Anything thrown, as an AppError (never a stack trace to the client), counted like forkbox's own. */
export function toAppError(c: Context<AppEnv>, err: unknown): AppError {
  let app: AppError
  if (err instanceof AppError) app = err
  // hono's bodyLimit errors the body stream of an upload without a Content-Length
  else if (err instanceof Error && err.name === 'BodyLimitError')
    app = new AppError('PAYLOAD_TOO_LARGE', 'request body is too large')
  else if (err instanceof HTTPException)
    app =
      err.status === 413
        ? new AppError('PAYLOAD_TOO_LARGE', 'request body is too large')
        : new AppError('VALIDATION_FAILED', err.message || 'bad request')
  else {
    c.var.services.log.error({ err, requestId: c.var.requestId }, 'unhandled error (e2b)')
    app = new AppError('INTERNAL', 'internal error')
  }
  c.var.services.metrics.errors.inc({ code: app.code })
  return app
}

/** The control-plane (and envd REST) error response: E2B's `{code, message}` plus forkbox's code. */
export function restError(c: Context<AppEnv>, err: unknown): Response {
  const app = toAppError(c, err)
  const status = errorStatus[app.code]
  return Response.json(
    { code: status, message: app.message, errorCode: app.code, requestId: c.var.requestId },
    { status },
  )
}

/** A Connect error body, for a unary response or a stream's end. */
export function connectError(c: Context<AppEnv>, err: unknown) {
  const app = toAppError(c, err)
  return { code: connectCodeOf[app.code], message: app.message, errorCode: app.code }
}

export function connectErrorResponse(c: Context<AppEnv>, err: unknown): Response {
  const body = connectError(c, err)
  return Response.json(body, { status: connectStatus[body.code] })
}
