// What the guest daemon may say to the agent. The guest is PID 1 of a sandbox whose root may forge
// its frames, so every message is checked against these before the agent acts on it.
import { z } from 'zod'
import type { ErrorCode } from './errors.ts'
import { CodeContext, ExecutionError, ProcessInfo, WatchEnd, WatchEvent } from './schemas.ts'

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

/** A directory watch is set up; its events follow in batches (each acked by count). */
export const GuestWatching = z.object({ type: z.literal('watching'), path: z.string().max(4096) })
export const GuestWatchEvents = z.object({ type: z.literal('events'), events: z.array(WatchEvent).max(65_536) })
/** Events of a watch were lost (the kernel's queue overflowed, or too many directories). */
export const GuestWatchOverflow = z.object({ type: z.literal('overflow'), reason: z.string().max(1024) })

export const GuestChannelMessage = z.discriminatedUnion('type', [
  GuestResult,
  GuestExit,
  GuestErrorMessage,
  GuestStarted,
  GuestFileOpened,
  GuestGap,
  GuestAttached,
  GuestDisplay,
  GuestWatching,
  GuestWatchEvents,
  GuestWatchOverflow,
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
/** `end_processes`: how many of the users' processes ended. */
export const GuestEnded = z.object({ ended: z.number().int().min(0) })
/** `oom_sweep`: the wedged processes it sent SIGKILL (after the host's OOM killer took their stubs), and those that did not end. */
export const GuestSwept = z.object({
  killed: z.array(z.number().int().positive()).max(100_000),
  stuck: z.array(z.number().int().positive()).max(100_000),
})

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
  'CODE_RUNTIME_MISSING',
  'GUEST_ERROR',
] as const satisfies readonly ErrorCode[]
export type GuestErrorCode = (typeof guestErrorCodes)[number]

export function isGuestErrorCode(value: unknown): value is GuestErrorCode {
  return typeof value === 'string' && (guestErrorCodes as readonly string[]).includes(value)
}

// ---- the values of `result` the golden frames also pin down ----

export const GuestPing = z.object({ version, uptimeMs: int.min(0) })
export const GuestUsage = z.object({ usedBytes: bytes })
/** How a file read ends (after its empty file frame): the bytes it sent. */
export const GuestReadDone = z.object({ size: bytes })
export const GuestDetached = z.object({ detached: z.literal(true) })
export const GuestWatchEnd = WatchEnd

// ---- agent → guest: the requests (the guest applies a default to every field left out) ----

const env = z.record(z.string(), z.string())
const user = z.string().optional()
const pid = int.positive()
const fileRequest = { path: z.string(), user }

export const GuestRequest = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('exec'),
    cmd: z.string().optional(),
    argv: z.array(z.string()).optional(),
    cwd: z.string().optional(),
    env: env.optional(),
    user,
    timeoutMs: int.min(0).optional(),
    maxOutputBytes: bytes.optional(),
    window: bytes.optional(),
    stdin: z.boolean().optional(),
    background: z.boolean().optional(),
    pty: z.boolean().optional(),
    cols: int.positive().optional(),
    rows: int.positive().optional(),
  }),
  z.object({ op: z.literal('signal'), signal: z.string().optional() }),
  z.object({ op: z.literal('resize'), cols: int.positive(), rows: int.positive() }),
  z.object({ op: z.literal('ack'), bytes }),
  z.object({ op: z.literal('abort') }),
  z.object({
    op: z.literal('proc_attach'),
    pid,
    offset: bytes.optional(),
    output: z.boolean().optional(),
    window: bytes.optional(),
  }),
  z.object({ op: z.literal('proc_detach') }),
  z.object({ op: z.literal('proc_ack'), bytes }),
  z.object({ op: z.literal('proc_list') }),
  z.object({ op: z.literal('proc_stdin'), pid, data: z.string().optional(), eof: z.boolean().optional() }),
  z.object({ op: z.literal('proc_signal'), pid, signal: z.string().optional() }),
  z.object({ op: z.literal('read'), ...fileRequest, window: bytes.optional() }),
  z.object({ op: z.literal('write'), ...fileRequest, mode: int.min(0).optional(), metadata: env.optional() }),
  z.object({ op: z.literal('stat'), ...fileRequest }),
  z.object({ op: z.literal('mkdir'), ...fileRequest }),
  z.object({
    op: z.literal('list'),
    ...fileRequest,
    depth: int.positive().optional(),
    metadata: z.boolean().optional(),
  }),
  z.object({ op: z.literal('remove'), ...fileRequest, recursive: z.boolean().optional() }),
  z.object({ op: z.literal('rename'), from: z.string(), to: z.string(), user }),
  z.object({ op: z.literal('watch'), ...fileRequest, recursive: z.boolean().optional() }),
  z.object({ op: z.literal('unwatch') }),
  z.object({
    op: z.literal('run_code'),
    code: z.string(),
    language: z.string().optional(),
    context: z.string().optional(),
    env: env.optional(),
    timeoutMs: int.min(0).optional(),
    maxOutputBytes: bytes.optional(),
    silent: z.boolean().optional(),
  }),
  z.object({
    op: z.literal('context_create'),
    language: z.string().optional(),
    cwd: z.string().optional(),
    user,
    env: env.optional(),
  }),
  z.object({ op: z.literal('context_list') }),
  z.object({ op: z.literal('context_restart'), context: z.string().optional(), language: z.string().optional() }),
  z.object({ op: z.literal('context_remove'), context: z.string().optional(), language: z.string().optional() }),
  z.object({ op: z.literal('context_ready'), context: z.string().optional(), language: z.string().optional() }),
  z.object({ op: z.literal('interrupt') }),
  z.object({ op: z.literal('ping') }),
  z.object({ op: z.literal('usage') }),
  z.object({ op: z.literal('end_processes') }),
  z.object({ op: z.literal('oom_sweep') }),
  z.object({
    op: z.literal('configure'),
    env: env.optional(),
    /** The sandbox's name: its hostname, and what its machine and boot ids derive from. */
    hostname: z.string().optional(),
    merge: z.boolean().optional(),
    restored: z.boolean().optional(),
  }),
])
export type GuestRequest = z.infer<typeof GuestRequest>
