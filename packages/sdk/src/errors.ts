// Typed errors rebuilt from the API's `{ error: { code, message, details, requestId } }` body.
import {
  type BuildLogEntry,
  type ErrorCode,
  FORKBOX_VERSION,
  NO_ROUTE_PREFIX,
  type SandboxErrorReason,
  type TemplateBuild,
  VERSION_HEADER,
} from '@forkbox/protocol'

/** Failures detected by the SDK itself, never sent by the server. */
export type ClientErrorCode =
  | 'CONNECTION_ERROR'
  | 'UNEXPECTED_RESPONSE'
  | 'INVALID_CONFIG'
  | 'UNSUPPORTED_BY_SERVER'
  /** Asked of the browser/edge build what needs Node (a file system): the credentials file, a build context by path. */
  | 'UNSUPPORTED_BY_RUNTIME'

/** A server code (open-ended so a newer server's codes pass through) or a client-side one. */
export type ForkboxErrorCode = ErrorCode | ClientErrorCode | (string & {})

export interface ForkboxErrorInit {
  /** HTTP status; undefined when the error did not come from a response. */
  status?: number
  requestId?: string
  details?: Record<string, unknown>
  cause?: unknown
}

export class ForkboxError extends Error {
  readonly code: ForkboxErrorCode
  readonly status: number | undefined
  readonly requestId: string | undefined
  readonly details: Record<string, unknown> | undefined

  constructor(code: ForkboxErrorCode, message: string, init: ForkboxErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = new.target.name
    this.code = code
    this.status = init.status
    this.requestId = init.requestId
    this.details = init.details
  }
}

/** 400: the request did not validate (VALIDATION_FAILED, INVALID_PATH, MALFORMED_JSON). */
export class ValidationError extends ForkboxError {}
/** 401, or no API key could be found before sending anything. */
export class AuthenticationError extends ForkboxError {}
/** 403 */
export class PermissionDeniedError extends ForkboxError {}
/** 404: sandbox, template, key or file not found. */
export class NotFoundError extends ForkboxError {}
/**
 * UNSUPPORTED_BY_SERVER: the server does not serve a call this SDK makes — it is older than the
 * SDK (`serverVersion`, when it says). A NotFoundError, as the server's 404 was.
 */
export class UnsupportedByServerError extends NotFoundError {
  readonly serverVersion: string | undefined

  constructor(code: ForkboxErrorCode, message: string, init: ForkboxErrorInit & { serverVersion?: string } = {}) {
    super(code, message, init)
    this.serverVersion = init.serverVersion
  }
}

/**
 * The error for a non-2xx response to `method path`: a 404 for a route the server does not serve
 * (an older server than this SDK) is UNSUPPORTED_BY_SERVER, saying which versions; else as the
 * body says.
 */
export function errorFor(method: string, path: string, res: Response, bodyText: string): ForkboxError {
  const err = errorFromResponse(res.status, bodyText, res.headers.get('x-request-id'))
  const noRoute = err.details?.noRoute === true || err.message.startsWith(NO_ROUTE_PREFIX)
  if (res.status !== 404 || err.code !== 'NOT_FOUND' || !noRoute) return err
  const serverVersion = res.headers.get(VERSION_HEADER) ?? undefined
  const server = serverVersion ? `forkbox ${serverVersion}` : 'a forkbox older than 0.1.0'
  return new UnsupportedByServerError(
    'UNSUPPORTED_BY_SERVER',
    `this server (${server}) does not serve ${method} ${path}, which this SDK (${FORKBOX_VERSION}) calls: upgrade the server`,
    { status: 404, requestId: err.requestId, details: err.details, serverVersion },
  )
}

/** 408 */
export class TimeoutError extends ForkboxError {}
/** 409: SANDBOX_NOT_RUNNING, FILE_EXISTS, NOT_A_DIRECTORY, ... */
export class ConflictError extends ForkboxError {}
/** 413 */
export class PayloadTooLargeError extends ForkboxError {}
/** 429 */
export class RateLimitError extends ForkboxError {}
/** 503 */
export class ServiceUnavailableError extends ForkboxError {}
/** Any other 5xx. */
export class InternalServerError extends ForkboxError {}
/** The server could not be reached, or the connection broke before a response arrived. */
export class ConnectionError extends ForkboxError {}

/** The sandbox died by itself (memory or pids limit, ...); `reason` says why. */
export class SandboxErroredError extends ForkboxError {
  readonly reason: SandboxErrorReason | (string & {}) | undefined

  constructor(code: ForkboxErrorCode, message: string, init: ForkboxErrorInit = {}) {
    super(code, message, init)
    const reason = init.details?.reason
    this.reason = typeof reason === 'string' ? reason : undefined
  }
}

/** How many of a failed build's last log lines its error carries. */
export const BUILD_LOG_TAIL_LINES = 20

/** One log line as `[step N] message`, for error messages and plain output. */
export function formatBuildLogLine(entry: BuildLogEntry): string {
  return `${entry.step === null ? '' : `[step ${entry.step}] `}${entry.message}`
}

/**
 * A template build that ended `failed`: `code` and the first line of `message` are the build's
 * error; `logTail` holds its last log lines, which the message repeats below.
 */
export class TemplateBuildError extends ForkboxError {
  readonly buildId: string
  readonly build: TemplateBuild
  readonly logTail: BuildLogEntry[]

  constructor(build: TemplateBuild, logTail: BuildLogEntry[]) {
    const error = build.error ?? { code: 'INTERNAL', message: 'the build failed without a reason' }
    const tail = logTail.map((e) => `  ${formatBuildLogLine(e)}`).join('\n')
    super(error.code, tail ? `${error.message}\n${tail}` : error.message, { details: { buildId: build.id } })
    this.buildId = build.id
    this.build = build
    this.logTail = logTail
  }
}

type ForkboxErrorClass = new (code: ForkboxErrorCode, message: string, init?: ForkboxErrorInit) => ForkboxError

const classByStatus: Record<number, ForkboxErrorClass> = {
  400: ValidationError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  408: TimeoutError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitError,
  503: ServiceUnavailableError,
}

function errorClassFor(status: number, code: string): ForkboxErrorClass {
  if (code === 'SANDBOX_ERRORED') return SandboxErroredError
  const byStatus = classByStatus[status]
  if (byStatus) return byStatus
  return status >= 500 ? InternalServerError : ForkboxError
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Builds the typed error for a non-2xx response from its status, body text and `X-Request-Id`. */
export function errorFromResponse(status: number, bodyText: string, headerRequestId?: string | null): ForkboxError {
  let parsed: unknown
  try {
    parsed = JSON.parse(bodyText)
  } catch {
    parsed = undefined
  }
  const error = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined
  const requestId = typeof error?.requestId === 'string' ? error.requestId : (headerRequestId ?? undefined) || undefined
  if (error && typeof error.code === 'string') {
    const message = typeof error.message === 'string' ? error.message : `HTTP ${status}`
    const details = isRecord(error.details) ? error.details : undefined
    const ErrorClass = errorClassFor(status, error.code)
    return new ErrorClass(error.code, message, { status, requestId, details })
  }
  const snippet = bodyText.trim().slice(0, 200)
  const ErrorClass = errorClassFor(status, '')
  return new ErrorClass('UNEXPECTED_RESPONSE', snippet ? `HTTP ${status}: ${snippet}` : `HTTP ${status}`, {
    status,
    requestId,
  })
}
