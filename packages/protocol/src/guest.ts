// What the guest daemon may say to the agent. The guest is PID 1 of a sandbox whose root may forge
// its frames, so every message is checked against these before the agent acts on it.
import { z } from 'zod'
import type { ErrorCode } from './errors.ts'
import { CodeContext, ExecutionError, ProcessInfo } from './schemas.ts'

const int = z.number().int()
/** A byte count or offset. */
const bytes = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)
const version = z.string().max(64)

// ---- channel 0: the daemon itself ----

/** Sent once after a boot (a restored guest said it before its checkpoint). */
export const GuestReady = z.object({ type: z.literal('ready'), version: version.optional(), pid: int.optional() })
/** The answer to a resync: the first channel the new agent may use. */
export const GuestResynced = z.object({
  type: z.literal('resynced'),
  nextChannel: z.number().int().min(1).max(0xffff_ffff),
  version: version.optional(),
})
export const GuestDaemonMessage = z.discriminatedUnion('type', [GuestReady, GuestResynced])
export type GuestDaemonMessage = z.infer<typeof GuestDaemonMessage>

// ---- a request's channel: the one message that ends it ----

export const GuestResult = z.object({ type: z.literal('result'), value: z.unknown() })
export const GuestExit = z.object({
  type: z.literal('exit'),
  exitCode: int,
  signal: z.string().max(32).nullable(),
  timedOut: z.boolean(),
  truncated: z.boolean().optional(),
  durationMs: z.number().min(0),
  /** A background process's: its log offset after the last output byte. */
  offset: bytes.optional(),
})
export type GuestExit = z.infer<typeof GuestExit>
export const GuestErrorMessage = z.object({ type: z.literal('error'), code: z.string().max(64), message: z.string() })

// ---- a request's channel: what comes before the end ----

/** A command (exec, terminal) is running. */
export const GuestStarted = z.object({ type: z.literal('started'), pid: int.positive() })
/** A file read opened its file; its bytes follow as file frames (size null: the kernel does not say, as in procfs). */
export const GuestFileOpened = z.object({ type: z.literal('file'), size: bytes.nullable() })
/** A background process's log dropped this many bytes before this reader got them. */
export const GuestGap = z.object({ type: z.literal('gap'), bytes })
export const GuestAttached = z.object({ type: z.literal('attached'), pid: int, start: bytes, end: bytes })
/** A code cell's rich output (MIME type → data). */
export const GuestDisplay = z.object({
  type: z.literal('display'),
  main: z.boolean(),
  data: z.record(z.string(), z.unknown()),
})

export const GuestChannelMessage = z.discriminatedUnion('type', [
  GuestResult,
  GuestExit,
  GuestErrorMessage,
  GuestStarted,
  GuestFileOpened,
  GuestGap,
  GuestAttached,
  GuestDisplay,
])
export type GuestChannelMessage = z.infer<typeof GuestChannelMessage>
export type GuestTerminalMessage = Extract<GuestChannelMessage, { type: 'result' | 'exit' | 'error' }>
export type GuestEventMessage = Exclude<GuestChannelMessage, GuestTerminalMessage>

// ---- the values of `result` the agent reads ----

export const GuestProcessStarted = z.object({ pid: int.positive() })
/** How an attach to a background process ends: the process exited, or the caller detached. */
export const GuestAttachEnd = z.union([
  GuestExit.extend({ offset: bytes }),
  GuestResult.extend({ value: z.object({ detached: z.literal(true) }) }),
])
export const GuestCellResult = z.object({
  executionCount: int.nullable(),
  error: ExecutionError.nullable(),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  durationMs: z.number().min(0),
})
export const GuestProcessList = z.array(ProcessInfo)
export const GuestContextList = z.array(CodeContext)
export const GuestEmpty = z.object({})
/** A restored guest's answer to `configure`: the first channel the new agent may use. */
export const GuestConfigured = z.object({ nextChannel: z.number().int().min(1).max(0xffff_ffff).optional() })

/**
 * The error codes a guest may answer a request with; any other code it sends becomes GUEST_ERROR
 * (a guest must not speak for the platform: no INTERNAL, no UNAUTHENTICATED, no retryable 429/503).
 */
export const guestErrorCodes = [
  'VALIDATION_FAILED',
  'INVALID_PATH',
  'FILE_NOT_FOUND',
  'PROCESS_NOT_FOUND',
  'CONTEXT_NOT_FOUND',
  'FILE_EXISTS',
  'NOT_A_DIRECTORY',
  'IS_A_DIRECTORY',
  'NOT_A_REGULAR_FILE',
  'DIRECTORY_NOT_EMPTY',
  'PERMISSION_DENIED',
  'PAYLOAD_TOO_LARGE',
  'EXEC_FAILED',
  'CANCELLED',
  'NO_SPACE',
  'RESOURCE_LIMIT_EXCEEDED',
  'GUEST_ERROR',
] as const satisfies readonly ErrorCode[]
export type GuestErrorCode = (typeof guestErrorCodes)[number]

export function isGuestErrorCode(value: unknown): value is GuestErrorCode {
  return typeof value === 'string' && (guestErrorCodes as readonly string[]).includes(value)
}
