// forkbox's errors in the two shapes the E2B clients read: REST `{code: <status>, message}` and
// Connect `{code: "not_found", message}`; forkbox's own stable code and the request id travel along.
// http/errors.ts builds them, as it does forkbox's own. And the refusal of what forkbox does not serve.
import { AppError, type ErrorCode, errorStatus } from '@forkbox/protocol'
import type { ErrorFormat } from '../http/errors.ts'

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
  QUOTA_EXCEEDED: 'resource_exhausted',
  CONFLICT: 'failed_precondition',
  NO_CAPACITY: 'unavailable',
  HOST_UNREACHABLE: 'unavailable',
  STORE_UNAVAILABLE: 'unavailable',
  SANDBOX_MOVING: 'unavailable',
  TEMPLATE_UNAVAILABLE: 'unavailable',
  GUEST_ERROR: 'internal',
  PORT_UNREACHABLE: 'unavailable',
  CODE_RUNTIME_MISSING: 'failed_precondition',
  TEMPLATE_CONFLICT: 'failed_precondition',
  IMAGE_NOT_FOUND: 'not_found',
  REGISTRY_UNREACHABLE: 'unavailable',
  REGISTRY_AUTH_FAILED: 'permission_denied',
  REGISTRY_NOT_ALLOWED: 'permission_denied',
  NOT_IMPLEMENTED: 'unimplemented',
  BUILD_STEP_FAILED: 'failed_precondition',
  BUILD_TIMEOUT: 'deadline_exceeded',
  INTERNAL: 'internal',
} as const satisfies Record<ErrorCode, ConnectCode>

/** The control plane's (and envd REST's) shape: E2B's `{code: <status>, message}` plus forkbox's code. */
export const e2bRestErrors: ErrorFormat = {
  status: (e) => errorStatus[e.code],
  body: (e, requestId) => ({ code: errorStatus[e.code], message: e.message, errorCode: e.code, requestId }),
}

/** The Connect shape, for a unary response or a stream's end. */
export const connectErrors: ErrorFormat<{ code: ConnectCode; message: string; errorCode: ErrorCode }> = {
  status: (e) => connectStatus[connectCodeOf[e.code]],
  body: (e, requestId) => ({ code: connectCodeOf[e.code], message: e.message, errorCode: e.code, requestId }),
}

/** A refusal of what forkbox does not serve, saying what to use instead. */
export function unsupported(what: string, instead: string): never {
  throw new AppError('NOT_IMPLEMENTED', `${what} is not supported by forkbox; ${instead}`)
}
