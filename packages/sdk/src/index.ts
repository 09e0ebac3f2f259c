/**
 * The forkbox TypeScript SDK: sandboxes, commands, files, code cells, snapshots and forks.
 * @module @forkbox/sdk
 */
// The public surface of @forkbox/sdk; adding a name here is a public-API decision.
export type {
  ApiKeyInfo,
  AuditEntry,
  BuildLogEntry,
  FileEntry,
  Host,
  HostCapacity,
  HostState,
  KeyQuotas,
  KeyRateLimits,
  KeyScopes,
  RateLimit,
  Resources,
  SandboxState,
  TemplateBuild,
  TemplateInfo,
  TemplateListing,
  UsageFigures,
  UsageReport,
  UserTemplate,
  WatchEnd,
  WatchEventType,
} from '@forkbox/protocol'
export { FORKBOX_VERSION as VERSION } from '@forkbox/protocol'
export type { FollowBuildOptions } from './build-logs.ts'
export { ForkboxClient, type ForkboxClientOptions } from './client.ts'
export {
  type CodeContext,
  CodeContexts,
  type CreateCodeContextOptions,
  Execution,
  type ExecutionError,
  type Language,
  type Result,
  type RunCodeOptions,
} from './code.ts'
export {
  type ConfigSourceOptions,
  type Credentials,
  credentialsPath,
  DEFAULT_URL,
  type ResolveConfigOptions,
  type ResolvedConfig,
  readCredentials,
  requireApiKey,
  resolveConfig,
  writeCredentials,
} from './config.ts'
export type { BuildContext } from './context-tar.ts'
export {
  AuthenticationError,
  type ClientErrorCode,
  ConflictError,
  ConnectionError,
  ForkboxError,
  type ForkboxErrorCode,
  type ForkboxErrorInit,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitError,
  SandboxErroredError,
  ServiceUnavailableError,
  TemplateBuildError,
  TimeoutError,
  UnsupportedByServerError,
  ValidationError,
} from './errors.ts'
export type { EventsOptions, SandboxEvent, SandboxEventType } from './events.ts'
export {
  type FileOptions,
  Files,
  type FileUrlOptions,
  type ListFilesOptions,
  type ReadFileOptions,
  type RemoveFileOptions,
  type WriteFileOptions,
} from './files.ts'
export { type DrainReport, Hosts } from './hosts.ts'
export type { ConnectionOptions, RequestOptions } from './http.ts'
export {
  type AuditOptions,
  type CreatedKey,
  type CreateKeyOptions,
  Keys,
  type UpdateKeyOptions,
  type UsageOptions,
} from './keys.ts'
export {
  type OutputCallbacks,
  type ProcessEvent,
  type ProcessExitResult,
  Processes,
  ProcessHandle,
  type ProcessInfo,
} from './processes.ts'
export { Pty, type PtyExit, PtyHandle, type PtyOptions } from './pty.ts'
export {
  type ConnectSandboxOptions,
  type CreateSandboxOptions,
  type ExecBytesOutput,
  type ExecOptions,
  type ExecOutput,
  type ForkOptions,
  type KillSandboxOptions,
  type ListSandboxesOptions,
  Sandbox,
  type SandboxInfo,
  type SandboxMetrics,
  type SnapshotInfo,
} from './sandbox.ts'
export { Snapshots } from './snapshots.ts'
export {
  type BuildTemplateOptions,
  type BuildWithLogs,
  type GetBuildOptions,
  type ImageArchive,
  type LogsOptions,
  type PruneOptions,
  type PruneResult,
  Template,
  Templates,
  type WaitForBuildOptions,
} from './templates.ts'
export { type FileChange, WatchHandle, type WatchOptions } from './watch.ts'
