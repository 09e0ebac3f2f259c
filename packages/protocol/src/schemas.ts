// The HTTP API's request and response shapes: validated by the server, typed for the SDK, and
// the source of the OpenAPI document.
import { z } from 'zod'
import { errorCodes, sandboxErrorReasons } from './errors.ts'

export const MAX_TTL_SECONDS = 7 * 24 * 3600
/** A sandbox's TTL when the create names none. */
export const DEFAULT_TTL_SECONDS = 300

/** `lost`: its host stopped answering; it may come back (`running` again) when the host does. */
export const SandboxState = z.enum(['starting', 'running', 'hibernated', 'killed', 'errored', 'lost'])
export type SandboxState = z.infer<typeof SandboxState>

// Stricter than execve (which takes any name without '=' or NUL): what a shell can also expand.
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names are letters, digits and _')
const envValue = z
  .string()
  .max(32 * 1024)
  .refine((v) => !v.includes('\0'), 'env values cannot hold a NUL byte')
/** Environment variables of a sandbox, command, terminal or code context. */
export const EnvVars = z.record(envName, envValue).refine((e) => Object.keys(e).length <= 256, {
  message: 'at most 256 env vars',
})

export const Metadata = z
  .record(z.string().min(1).max(128), z.string().max(1024))
  .refine((m) => Object.keys(m).length <= 64, { message: 'at most 64 metadata entries' })

export const Resources = z.object({
  vcpus: z.number().positive().max(64).optional(),
  memoryMB: z
    .number()
    .int()
    .min(64)
    .max(256 * 1024)
    .optional(),
  diskMB: z
    .number()
    .int()
    .min(16)
    .max(1024 * 1024)
    .optional(),
  pids: z.number().int().min(16).max(65536).optional(),
})
export type Resources = z.infer<typeof Resources>

export const ResolvedResources = z.object({
  vcpus: z.number(),
  memoryMB: z.number().int(),
  diskMB: z.number().int(),
  pids: z.number().int(),
})
export type ResolvedResources = z.infer<typeof ResolvedResources>

// ---- network ----

const IPV4_CIDR = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}(\/(3[0-2]|[12]?\d))?$/
const DOMAIN = /^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}\.?$/i

/** An egress rule: an IPv4 address or CIDR block, or a domain name (`*.example.com`: any name under it). */
export const NetworkRule = z
  .string()
  .min(1)
  .max(253)
  .refine((r) => !r.includes(':'), { message: 'IPv6 rules are not supported: sandboxes have IPv4 only' })
  .refine((r) => IPV4_CIDR.test(r) || DOMAIN.test(r), {
    message: 'a rule is an IPv4 address or CIDR (203.0.113.0/24) or a domain name (example.com, *.example.com)',
  })

export const MAX_NETWORK_RULES = 256
export const Port = z.number().int().min(1).max(65535)

/** Asked at create (absent fields: no internet, no rules, no open ports) or by an update (absent fields: unchanged). */
export const NetworkOptions = z
  .object({
    /** Outbound connections at all (default false: none, not even DNS). */
    internet: z.boolean().optional(),
    /** Only these destinations (with internet); empty: anything not always blocked. */
    allowOut: z.array(NetworkRule).max(MAX_NETWORK_RULES).optional(),
    /** Never these (with internet), even if allowOut has them. */
    denyOut: z.array(NetworkRule).max(MAX_NETWORK_RULES).optional(),
    /** Ports of the sandbox reachable through the control plane (`/s/{id}/{port}/`), with a key or the access token. */
    ports: z.array(Port).max(64).optional(),
  })
  .strict()
export type NetworkOptions = z.input<typeof NetworkOptions>

export const NetworkPolicy = z.object({
  internet: z.boolean(),
  allowOut: z.array(z.string()),
  denyOut: z.array(z.string()),
  ports: z.array(z.number().int()),
})
export type NetworkPolicy = z.infer<typeof NetworkPolicy>

export const OnTimeout = z.enum(['kill', 'hibernate', 'hibernate-disk'])
export type OnTimeout = z.infer<typeof OnTimeout>

export const HibernateRequest = z
  .object({
    /**
     * Default true: memory, processes and disk are kept. False: only the disk; its processes end
     * and its template's start command starts again, so it wakes as if booted (E2B's
     * `pause({ keepMemory: false })`).
     */
    keepMemory: z.boolean().default(true),
  })
  .strict()
export type HibernateRequest = z.input<typeof HibernateRequest>

export const CreateSandboxRequest = z
  .object({
    template: z.string().min(1).max(128).default('base'),
    ttlSeconds: z.number().int().min(1).max(MAX_TTL_SECONDS).default(DEFAULT_TTL_SECONDS),
    metadata: Metadata.default({}),
    envs: EnvVars.default({}),
    resources: Resources.default({}),
    /** Start from a snapshot this key made (its template and resources), not from the template. */
    snapshot: z.string().min(1).max(64).optional(),
    /** Exempt from the idle reaper (the TTL still applies). */
    persistent: z.boolean().default(false),
    /**
     * Default true: frozen while idle (no CPU until the next call). False for workloads whose
     * in-sandbox timers must keep time while no call comes (a cron, a poller).
     */
    freeze: z.boolean().default(true),
    network: NetworkOptions.default({}),
    /**
     * What its TTL does: `kill` it, or `hibernate` it (memory and disk kept; the next call wakes
     * it, with its TTL from the start again; E2B's `lifecycle.onTimeout: 'pause'`), or
     * `hibernate-disk`: only its disk kept, it comes back as if booted (E2B's `keepMemory: false`).
     */
    onTimeout: OnTimeout.default('kill'),
  })
  .strict()
export type CreateSandboxRequest = z.input<typeof CreateSandboxRequest>

export const Sandbox = z.object({
  id: z.string(),
  template: z.string(),
  state: SandboxState,
  metadata: z.record(z.string(), z.string()),
  resources: ResolvedResources,
  createdAt: z.string(),
  expiresAt: z.string(),
  endedAt: z.string().nullable(),
  errorReason: z.enum(sandboxErrorReasons).nullable(),
  errorMessage: z.string().nullable(),
  persistent: z.boolean(),
  network: NetworkPolicy,
  onTimeout: OnTimeout,
  /** Frozen while idle (see `CreateSandboxRequest.freeze`). */
  freeze: z.boolean(),
  /** Opens the sandbox's exposed ports to whoever holds it (instead of an API key). */
  accessToken: z.string(),
  /** Exposed ports are served at `{port}-{id}.{domain}` on the API's port: each its own browser origin. */
  domain: z.string(),
})
export type Sandbox = z.infer<typeof Sandbox>

export const SandboxList = z.object({ sandboxes: z.array(Sandbox) })

export const SetTimeoutRequest = z.object({ ttlSeconds: z.number().int().min(1).max(MAX_TTL_SECONDS) }).strict()

export const MAX_EXEC_TIMEOUT_SECONDS = 24 * 3600
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024

export const ExecRequest = z
  .object({
    cmd: z.union([
      z
        .string()
        .min(1)
        .max(128 * 1024),
      z
        .array(z.string().max(128 * 1024))
        .min(1)
        .max(4096),
    ]),
    env: EnvVars.optional(),
    cwd: z.string().min(1).max(4096).optional(),
    user: z
      .string()
      .regex(/^[a-z_][a-z0-9_-]*$/)
      .max(32)
      .optional(),
    stdin: z
      .string()
      .max(16 * 1024 * 1024)
      .optional(),
    stdinEncoding: z.enum(['utf8', 'base64']).default('utf8'),
    /** Default 60 for a command waited on; none for a background one. */
    timeoutSeconds: z.number().positive().max(MAX_EXEC_TIMEOUT_SECONDS).optional(),
    /** Cap per stream; default 16 MiB for a command waited on, none for a streamed one (its
     * reader's pace bounds it). */
    maxOutputBytes: z
      .number()
      .int()
      .min(0)
      .max(64 * 1024 * 1024)
      .optional(),
    encoding: z.enum(['utf8', 'base64']).default('utf8'),
    /** Start it and return its pid at once; it runs on after the request (see /processes). */
    background: z.boolean().default(false),
  })
  .strict()
export type ExecRequest = z.input<typeof ExecRequest>
export const DEFAULT_EXEC_TIMEOUT_SECONDS = 60

export const ExecResult = z.object({
  exitCode: z.number().int(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  encoding: z.enum(['utf8', 'base64']),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  durationMs: z.number(),
})
export type ExecResult = z.infer<typeof ExecResult>

export const FileType = z.enum(['file', 'dir', 'symlink', 'other'])
export const FileEntry = z.object({
  name: z.string(),
  path: z.string(),
  type: FileType,
  size: z.number().int(),
  mode: z.number().int(),
  mtimeMs: z.number(),
  uid: z.number().int(),
  gid: z.number().int(),
  target: z.string().optional(),
  /** User metadata written with the file (`X-Metadata-<key>` headers): stat always, a listing when asked. */
  metadata: z.record(z.string(), z.string()).optional(),
})
export type FileEntry = z.infer<typeof FileEntry>

/** File metadata keys: HTTP token characters (they travel as `X-Metadata-<key>` headers). */
export const FILE_METADATA_KEY = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,128}$/
/** File metadata values: printable ASCII. */
export const FILE_METADATA_VALUE = /^[\x20-\x7e]{0,4096}$/
export const MAX_FILE_METADATA_ENTRIES = 64
export const FileMetadata = z
  .record(
    z.string().regex(FILE_METADATA_KEY, 'a metadata key is 1-128 HTTP token characters'),
    z.string().regex(FILE_METADATA_VALUE, 'a metadata value is at most 4096 printable ASCII characters'),
  )
  .refine(
    (m) => Object.keys(m).length <= MAX_FILE_METADATA_ENTRIES,
    `at most ${MAX_FILE_METADATA_ENTRIES} metadata entries`,
  )

export const FileList = z.object({ entries: z.array(FileEntry) })

/** Sandbox paths: absolute or relative to the user's home, no `..` segments, no NUL. */
export const SandboxPath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), { message: 'path contains NUL' })
  .refine((p) => !p.split('/').includes('..'), { message: 'path contains a .. segment' })

export const PathQuery = z.object({ path: SandboxPath, user: z.string().max(32).optional() })
export const WatchQuery = PathQuery.extend({ recursive: z.enum(['true', 'false']).default('false') })

/** Longest a signed file URL may be valid: 7 days. */
export const MAX_FILE_URL_SECONDS = 7 * 24 * 3600
export const FileUrlRequest = z
  .object({
    path: SandboxPath,
    /** `read`: a GET downloads the file; `write`: a PUT of the raw body writes it. */
    operation: z.enum(['read', 'write']).default('read'),
    expiresInSeconds: z.number().int().min(1).max(MAX_FILE_URL_SECONDS).default(3600),
    user: z.string().max(32).optional(),
  })
  .strict()
export const FileUrl = z.object({
  /** On the origin the request came to. */
  url: z.string(),
  /** The same, from the API's root: for a client that knows the server by another address. */
  path: z.string(),
  expiresAt: z.string(),
})
export type FileUrl = z.infer<typeof FileUrl>

/** What changed in a watched directory: `name` is relative to it ("" for the directory itself). */
export const WatchEventType = z.enum(['create', 'write', 'remove', 'rename', 'chmod'])
export type WatchEventType = z.infer<typeof WatchEventType>
export const WatchEvent = z.object({ name: z.string().max(4096), type: WatchEventType })
export type WatchEvent = z.infer<typeof WatchEvent>
/** How a watch ended: stopped by its caller, or its directory was removed or moved away. */
export const WatchEnd = z.object({ reason: z.enum(['stopped', 'gone']) })
export type WatchEnd = z.infer<typeof WatchEnd>
export const ListQuery = PathQuery.extend({
  depth: z.coerce.number().int().min(1).max(16).default(1),
  /** Each entry's user metadata too (one more read per entry). */
  metadata: z.enum(['true', 'false']).default('false'),
})
export const RemoveQuery = PathQuery.extend({ recursive: z.enum(['true', 'false']).default('true') })
export const WriteQuery = PathQuery.extend({ mode: z.coerce.number().int().min(0).max(0o7777).optional() })
export const MakeDirRequest = z.object({ path: SandboxPath, user: z.string().max(32).optional() }).strict()
export const RenameRequest = z
  .object({ from: SandboxPath, to: SandboxPath, user: z.string().max(32).optional() })
  .strict()

export const ErrorBody = z.object({
  error: z.object({
    code: z.enum(errorCodes as [string, ...string[]]),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
    requestId: z.string(),
  }),
})
export type ErrorBody = z.infer<typeof ErrorBody>

/** A snapshot's name, unique among a key's snapshots (a new snapshot given a name takes it over). */
export const SnapshotName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'letters, digits, ".", "_" and "-", at most 64')
  .refine((n) => !n.startsWith('snap-'), 'a name may not start with "snap-" (snapshot ids do)')

export const CreateSnapshotRequest = z.object({ name: SnapshotName.optional() }).strict()
export type CreateSnapshotRequest = z.input<typeof CreateSnapshotRequest>

export const Snapshot = z.object({
  id: z.string(),
  /** Start sandboxes from it by this name as by its id (`snapshot: name`). */
  name: z.string().nullable(),
  sandboxId: z.string(),
  template: z.string(),
  resources: ResolvedResources,
  sizeBytes: z.number().int(),
  createdAt: z.string(),
})
export type Snapshot = z.infer<typeof Snapshot>
export const SnapshotList = z.object({ snapshots: z.array(Snapshot) })

export const MAX_FORK_COUNT = 16
export const ForkRequest = z
  .object({
    count: z.number().int().min(1).max(MAX_FORK_COUNT).default(1),
    ttlSeconds: z.number().int().min(1).max(MAX_TTL_SECONDS).default(DEFAULT_TTL_SECONDS),
    metadata: Metadata.optional(),
    /** On a fleet: the forks go across hosts (least loaded first), not beside the original. One box: no effect. */
    spread: z.boolean().optional(),
  })
  .strict()
export type ForkRequest = z.input<typeof ForkRequest>
export const ForkResult = z.object({ sandboxes: z.array(Sandbox) })

// ---- code interpreter ----

export const CODE_LANGUAGES = ['python', 'bash', 'javascript', 'typescript'] as const
export const CodeLanguage = z.enum(CODE_LANGUAGES)
export const ContextId = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/)
  .max(64)

export const RunCodeRequest = z
  .object({
    code: z.string().max(4 * 1024 * 1024),
    /** Runs in this language's default context unless `contextId` names one. */
    language: CodeLanguage.default('python'),
    contextId: ContextId.optional(),
    /** Set for this cell only. */
    envs: EnvVars.optional(),
    timeoutSeconds: z.number().positive().max(MAX_EXEC_TIMEOUT_SECONDS).default(300),
    maxOutputBytes: z
      .number()
      .int()
      .min(0)
      .max(64 * 1024 * 1024)
      .default(DEFAULT_MAX_OUTPUT_BYTES),
  })
  .strict()
export type RunCodeRequest = z.input<typeof RunCodeRequest>

/** One displayed value: every representation the object offers (images base64). */
export const CodeResult = z.object({
  isMainResult: z.boolean(),
  text: z.string().optional(),
  html: z.string().optional(),
  markdown: z.string().optional(),
  png: z.string().optional(),
  jpeg: z.string().optional(),
  svg: z.string().optional(),
  json: z.unknown().optional(),
  latex: z.string().optional(),
  javascript: z.string().optional(),
  pdf: z.string().optional(),
  /** A DataFrame's columns, each as the list of its values (what E2B's `data` holds). */
  data: z.record(z.string(), z.unknown()).optional(),
  /**
   * A matplotlib figure's chart as data (E2B's `chart`): `type` line, scatter, bar, pie,
   * box_and_whisker, superchart (one per axes) or unknown; `title`, `elements`, and for 2D charts
   * `x_label`, `y_label`, `x_unit`, `y_unit` (and, for line and scatter, ticks, tick labels, scales).
   */
  chart: z.record(z.string(), z.unknown()).optional(),
  /** Other MIME types, keyed by type. */
  extra: z.record(z.string(), z.unknown()).optional(),
})
export type CodeResult = z.infer<typeof CodeResult>

export const ExecutionError = z.object({ name: z.string(), value: z.string(), traceback: z.string() })
export type ExecutionError = z.infer<typeof ExecutionError>

export const Execution = z.object({
  results: z.array(CodeResult),
  logs: z.object({ stdout: z.array(z.string()), stderr: z.array(z.string()) }),
  error: ExecutionError.nullable(),
  executionCount: z.number().int().nullable(),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  durationMs: z.number(),
})
export type Execution = z.infer<typeof Execution>

export const CreateContextRequest = z
  .object({
    language: CodeLanguage.default('python'),
    cwd: z.string().min(1).max(4096).optional(),
    envs: EnvVars.optional(),
  })
  .strict()
export type CreateContextRequest = z.input<typeof CreateContextRequest>

export const CodeContext = z.object({
  id: z.string(),
  language: CodeLanguage,
  cwd: z.string().nullable(),
  running: z.boolean(),
})
export type CodeContext = z.infer<typeof CodeContext>
export const CodeContextList = z.object({ contexts: z.array(CodeContext) })

// ---- background processes ----

export const ProcessStarted = z.object({ pid: z.number().int() })
export const ProcessInfo = z.object({
  pid: z.number().int(),
  cmd: z.string(),
  running: z.boolean(),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  /** Unix seconds. */
  startedAt: z.number().nullable(),
  /** Bytes of output so far (both streams): the offset a reader reaches at the end. */
  outputBytes: z.number().int(),
})
export type ProcessInfo = z.infer<typeof ProcessInfo>
export const ProcessList = z.object({ processes: z.array(ProcessInfo) })
export const PidParam = z.object({ pid: z.coerce.number().int().positive() })
export const ProcessOutputQuery = z.object({
  /** Log offset to start from (0: the oldest kept output). */
  offset: z.coerce.number().int().min(0).default(0),
  encoding: z.enum(['utf8', 'base64']).default('utf8'),
})
export const ProcessStdinRequest = z
  .object({
    data: z
      .string()
      .max(16 * 1024 * 1024)
      .default(''),
    encoding: z.enum(['utf8', 'base64']).default('utf8'),
    /** Close the process's stdin after `data`. */
    eof: z.boolean().default(false),
  })
  .strict()
export const SIGNALS = [
  'SIGTERM',
  'SIGKILL',
  'SIGINT',
  'SIGHUP',
  'SIGQUIT',
  'SIGUSR1',
  'SIGUSR2',
  'SIGSTOP',
  'SIGCONT',
] as const
export const ProcessSignalRequest = z.object({ signal: z.enum(SIGNALS).default('SIGTERM') }).strict()
export const ProcessExitInfo = z.object({
  exitCode: z.number().int(),
  signal: z.string().nullable(),
  timedOut: z.boolean(),
  durationMs: z.number(),
  offset: z.number().int(),
})
