// The one registry of error codes and their HTTP statuses; a code without a status fails to compile.

export const errorStatus = {
  VALIDATION_FAILED: 400,
  INVALID_PATH: 400,
  MALFORMED_JSON: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SANDBOX_NOT_FOUND: 404,
  TEMPLATE_NOT_FOUND: 404,
  KEY_NOT_FOUND: 404,
  SNAPSHOT_NOT_FOUND: 404,
  CONTEXT_NOT_FOUND: 404,
  PROCESS_NOT_FOUND: 404,
  FILE_NOT_FOUND: 404,
  PORT_NOT_EXPOSED: 404,
  EXEC_TIMEOUT: 408,
  SANDBOX_NOT_RUNNING: 409,
  CANCELLED: 409,
  /** A concurrent change of the same thing won (a key rotated twice at once): read it again and retry. */
  CONFLICT: 409,
  FILE_EXISTS: 409,
  NOT_A_DIRECTORY: 409,
  IS_A_DIRECTORY: 409,
  /** A read of a device, FIFO or socket: only regular files are read. */
  NOT_A_REGULAR_FILE: 409,
  DIRECTORY_NOT_EMPTY: 409,
  PERMISSION_DENIED: 403,
  PAYLOAD_TOO_LARGE: 413,
  RESOURCE_LIMIT_EXCEEDED: 422,
  EXEC_FAILED: 422,
  NO_SPACE: 507,
  SANDBOX_ERRORED: 410,
  RATE_LIMITED: 429,
  /** A key's quota would be passed (`details.quota` names it, with its `limit` and what is `used`). */
  QUOTA_EXCEEDED: 429,
  NO_CAPACITY: 503,
  /** The host a sandbox runs on does not answer the control plane (retryable: it may come back). */
  HOST_UNREACHABLE: 503,
  /** The sandbox is being hibernated or moved to another host; the call did not start (retryable). */
  SANDBOX_MOVING: 503,
  /**
   * A template built on another host whose image no reachable host has now (retryable: its host
   * may come back); `details.rootfs` names the image.
   */
  TEMPLATE_UNAVAILABLE: 503,
  /** The control plane's database does not answer (retryable: sandboxes keep running meanwhile). */
  STORE_UNAVAILABLE: 503,
  GUEST_ERROR: 502,
  PORT_UNREACHABLE: 502,
  /** runCode in a template whose image lacks the language's runtime (python3, or node for javascript). */
  CODE_RUNTIME_MISSING: 422,
  /** A template or build is not in the state the call needs (a build that takes no context now, a public name taken). */
  TEMPLATE_CONFLICT: 409,
  /** A template's image (or its tag or digest) is not in its registry. */
  IMAGE_NOT_FOUND: 404,
  /** A template's registry did not answer (refused, no route, TLS refused, timed out). */
  REGISTRY_UNREACHABLE: 502,
  /** A template's registry refused the pull: credentials missing or wrong. */
  REGISTRY_AUTH_FAILED: 502,
  /**
   * A template's image names a registry on an address pulls may not reach (loopback, private,
   * link-local, the host's own) and the operator has not allow-listed it (FORKBOX_REGISTRY_ALLOW).
   */
  REGISTRY_NOT_ALLOWED: 403,
  /** A call of a foreign API forkbox speaks (the E2B compatibility layer) that it does not serve. */
  NOT_IMPLEMENTED: 501,
  /** A template build's RUN (or COPY) step exited non-zero; details carry the step, exit code and output tail. */
  BUILD_STEP_FAILED: 422,
  /** A template build ran past its build timeout. */
  BUILD_TIMEOUT: 408,
  INTERNAL: 500,
} as const

export type ErrorCode = keyof typeof errorStatus

export const errorCodes = Object.keys(errorStatus) as ErrorCode[]

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorStatus, value)
}

/** A failure with a stable code; the server turns it into `{ error: { code, message, details, requestId } }`. */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly details: Record<string, unknown> | undefined

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message)
    this.name = 'AppError'
    this.code = code
    this.details = details
  }

  get status(): number {
    return errorStatus[this.code]
  }
}

/** Why a sandbox stopped on its own; surfaced as `errorReason` and in SANDBOX_ERRORED details. */
export const sandboxErrorReasons = [
  'out_of_memory',
  'pids_limit',
  'guest_exited',
  'runtime_failed',
  'lost',
  /** Its host stopped answering the control plane (state `lost`, until the host is back). */
  'host_unreachable',
  /** The guest daemon sent what the protocol does not allow (forged or corrupt frames): stopped. */
  'guest_protocol_error',
  /** The guest daemon stopped answering (the agent's heartbeat went unanswered): stopped. */
  'guest_unresponsive',
] as const
export type SandboxErrorReason = (typeof sandboxErrorReasons)[number]
