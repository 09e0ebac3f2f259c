// The contract between the control plane and a host agent: the server drives sandboxes only
// through this interface, so an HTTP client for a remote agent can stand in for the local one.
import type { AgentSandbox } from './agent-sandbox.ts'
import type { SandboxErrorReason } from './errors.ts'
import { methodCalls } from './method-calls.ts'
import type { ResolvedResources } from './schemas.ts'
import type { TemplateInfo } from './templates.ts'

export interface StartSandboxSpec {
  id: string
  template: string
  resources: ResolvedResources
  envs: Record<string, string>
  /** Restore this snapshot (made by `AgentApi.snapshot`) instead of the template's. */
  snapshot?: string
  /** What it may reach (default: nothing). */
  network?: EgressPolicy
}

/** What a sandbox may reach, as the host enforces it: the egress part of the user-facing
 * `NetworkPolicy` record (which also lists exposed ports, served by the control plane). */
export interface EgressPolicy {
  internet: boolean
  allowOut: string[]
  denyOut: string[]
}

export interface SandboxUsage {
  id: string
  cpuSeconds: number
  memoryBytes: number
  /** Bytes the sandbox received and sent on its network interface. */
  networkRxBytes: number
  networkTxBytes: number
  /** Frozen while idle (`AgentApi.freeze`). */
  frozen?: boolean
  /**
   * The runsc container (also its bundle dir's name) and cgroup (under each hierarchy's root) that
   * hold the sandbox: a claimed pool sandbox keeps the pool's names (`pool-TEMPLATE-…`).
   */
  container?: string
  cgroup?: string
}

export interface SnapshotOptions {
  /**
   * The last image before the sandbox leaves this host (hibernate, migration): calls under way
   * finish first (for a while); new ones are held, then refused with SANDBOX_MOVING (not started).
   */
  final?: boolean
  /**
   * With `final`: before the image, every process in the sandbox ends and `template`'s start
   * command starts again, so the image holds its files and a fresh start, not its processes (a
   * filesystem-only pause: the sandbox comes back as if booted, its disk kept).
   */
  freshStart?: { template: string }
  /**
   * Also hash the image as it would be sent to another host (`sha256`): the record a receiver is
   * checked against later. A fleet asks for it; one host, whose images never move, does not.
   */
  digest?: boolean
}

/** What `AgentApi.snapshot` made. */
export interface SnapshotResult {
  sizeBytes: number
  /** With `SnapshotOptions.digest`: the SHA-256 (hex) of the image's export stream. */
  sha256?: string
}

/**
 * Where a pulled image comes from, and the SHA-256 (hex) the control plane recorded when its holder
 * made it: the receiver keeps the bytes only if they hash to that, whatever the sender says. Null
 * only for an image made before records were kept (then the sender's own hash is all there is).
 */
export type ImageSource = ({ url: string } | { store: true }) & { sha256: string | null }

/** A SHA-256 as images' records hold it. */
export const SHA256_HEX = /^[0-9a-f]{64}$/

/** A connection `AgentApi.connectPort` opened. */
export interface PortConnection {
  /** Resolves once the bytes are handed on (the sandbox side reading slowly holds it back). */
  write(chunk: Uint8Array): Promise<void>
  /** No more bytes from this side. */
  end(): void
  destroy(): void
  /** Settles once the sandbox side has ended (every `onData` delivered) or the connection failed. */
  closed: Promise<void>
}

/** One fork made by `AgentApi.fork`: running, or why it is not. */
export type ForkOutcome = { id: string; error: null } | { id: string; error: Error }

export interface ForkOptions {
  /** Called once the source's checkpoint is written, before any fork starts from it. */
  onCheckpointed?(): void | Promise<void>
  signal?: AbortSignal
  /** Across a fleet's hosts, least loaded first (one agent: ignored). */
  spread?: boolean
}

export interface TemplateProgress {
  template: string
  phase: string
  /** 0..1 when known */
  fraction?: number
  message?: string
}

/** A template a user builds: the server keeps who owns it; the agent its rootfs and baked snapshot. */
export interface TemplateBuildSpec {
  /** The agent's name for this version of the template (`[a-z0-9-]`, unique; never reused). */
  name: string
  description: string
  /** Where the rootfs comes from: an image in a registry, an uploaded image archive, or a Dockerfile with its context. */
  source:
    | { kind: 'image'; image: string }
    /** Once built, the spec is pinned as the Dockerfile `FROM` the archive's image that it became. */
    | { kind: 'archive'; archiveTar?: string }
    | {
        kind: 'dockerfile'
        dockerfile: string
        buildArgs: Record<string, string>
        /** The uploaded context tarball, on the agent's host; none: an empty context. */
        contextTar?: string
        /** `FROM forkbox:NAME` of the key's own (and public) templates: name → the agent's name of its ready version. */
        templates?: Record<string, string>
        /** Set once built: what the build made (its rootfs is found again by `key`). */
        built?: BuiltImage
      }
  resources: { defaults: ResolvedResources; maxima: ResolvedResources }
  /** Shell lines replacing the image's start command and ready check. */
  startCmd?: string
  readyCmd?: string
  /**
   * What the build's steps may reach: the internet (the default, with a sandbox's always-blocked
   * sets), or nothing at all (a `noNetwork` key's builds). Registry pulls are the platform's, not a
   * step's: they go through the pull namespace's rules either way.
   */
  buildNetwork?: 'internet' | 'none'
  /**
   * Bounds of this one run of the build, set by the control plane when it starts it and never
   * pinned: whose key the build's layers count against, and how many bytes the build may still
   * write (the key's templateBytes quota less what its templates take).
   */
  limits?: BuildLimits
}

export interface BuildLimits {
  /** The key the build runs for: its layers in the cache are counted and evicted as its own. */
  owner: string
  /** Most bytes the whole build may write (layers, unpacked images); unset: only the per-step bound. */
  maxBytes?: number
}

/** The uploaded file a build reads (its context tarball or image archive), if any. */
export function uploadOf(spec: TemplateBuildSpec): string | undefined {
  const { source } = spec
  return source.kind === 'dockerfile' ? source.contextTar : source.kind === 'archive' ? source.archiveTar : undefined
}

/** The spec with its upload read from `path` (undefined: none) instead. */
export function withUpload(spec: TemplateBuildSpec, path: string | undefined): TemplateBuildSpec {
  const { source } = spec
  if (source.kind === 'dockerfile') return { ...spec, source: { ...source, contextTar: path } }
  if (source.kind === 'archive') return { ...spec, source: { ...source, archiveTar: path } }
  return spec
}

export interface PruneOptions {
  layerCacheBytes?: number
  /** Only evict build layers down to the cap (what runs after every build). */
  layersOnly?: boolean
  /** Also evict this key's own build layers down to what it may keep (its templateBytes quota). */
  owner?: { keyId: string; maxBytes: number }
}

export interface TemplatePruneResult {
  /** What went, as paths relative to the agent's templates dir. */
  removed: string[]
  freedBytes: number
}

/** A key's registry logins by registry (`host[:port]` as image references name it): only ever passed, never kept by the agent. */
export type RegistryAuth = Record<string, { username: string; password: string }>

/** What a Dockerfile build leaves for its sandboxes: the image config, as Docker keeps it. */
export interface BuiltImage {
  /** The last layer's key: names the assembled rootfs. */
  key: string
  env: Record<string, string>
  user?: string
  workdir?: string
  /** ENTRYPOINT + CMD: started at bake time, running in every sandbox. */
  startCmd?: string[]
  /** HEALTHCHECK CMD (or a ready command): must pass before the snapshot is baked. */
  readyCmd?: string[]
  exposedPorts: number[]
}

/** One line of a build's log, as the agent reports it. */
export interface BuildLogLine {
  /** The Dockerfile step (1-based, in build order) the line belongs to; absent for the build's own lines. */
  step?: number
  stream: 'system' | 'stdout' | 'stderr'
  message: string
}

/** What a finished build pins: registering the template again (after a restart) needs no registry. */
export interface TemplateBuildResult {
  /** The spec to register from now on: an image reference pinned to the digest it resolved to. */
  pinned: TemplateBuildSpec
  /** What the built template takes on the host's disk (its rootfs and baked snapshot). */
  sizeBytes?: number
  /**
   * The built rootfs (a Dockerfile or archive build) as other hosts pull it: its `built-…` name and
   * the SHA-256 (hex) of its export stream, recorded by the control plane for their pulls.
   */
  rootfs?: { name: string; sha256: string }
}

export type SandboxExitListener = (id: string, reason: SandboxErrorReason | null, message: string | null) => void

/** Every method is async: a client of a remote agent implements this as it is. */
export interface AgentApi {
  templates(): Promise<TemplateInfo[]>
  /** Builds the template's rootfs if it is not in the cache yet. */
  ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void>
  /**
   * Builds a user's template and bakes its snapshot; rejects (with the failing step's output) if
   * either fails. Known to the agent from then on under `spec.name`.
   */
  buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
    /**
     * The build context (or image archive) the spec's source takes, as bytes: from a control plane
     * on another machine, whose upload path means nothing here. Kept in scratch space for the build.
     */
    upload?: AsyncIterable<Uint8Array>,
  ): Promise<TemplateBuildResult>
  /** Makes templates built before known again (after a restart): their artifacts are rebuilt on use if gone. */
  registerTemplates(specs: TemplateBuildSpec[]): Promise<void>
  /** Forgets a user's template and removes its rootfs and snapshot (sandboxes running from it carry on). */
  removeTemplate(name: string): Promise<void>
  /**
   * Removes what of the template store nothing uses (rootfs dirs and snapshots of deleted or
   * rebuilt templates, older guests, unused pulled images) and evicts build layers, least recently
   * used first, down to `layerCacheBytes` (default: the agent's cap); with `layersOnly`, only that.
   */
  pruneTemplates(opts?: PruneOptions): Promise<TemplatePruneResult>
  start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void>
  /**
   * The data plane of one running sandbox: commands, processes, terminals, files, watches and code,
   * each call gated like any other on it (a frozen sandbox thawed first, a checkpoint waiting for
   * it). Resolved to where the sandbox runs once per handle: a handle is for one call or a few in a
   * row, not kept (the sandbox may move).
   */
  sandbox(id: string): AgentSandbox
  /** Checkpoints a running sandbox (memory, processes and disk) into snapshot `snapshotId`; it keeps running. */
  snapshot(id: string, snapshotId: string, opts?: SnapshotOptions): Promise<SnapshotResult>
  /**
   * New sandboxes from the live state of `sourceId` (which keeps running): one checkpoint, then
   * every child restored from it in parallel; the checkpoint is deleted once they have settled.
   * Rejects, with no child started, when the checkpoint fails; otherwise each child's outcome.
   */
  fork(sourceId: string, children: Omit<StartSandboxSpec, 'snapshot'>[], opts?: ForkOptions): Promise<ForkOutcome[]>
  /** A snapshot's image (a tar of its files) to copy to another host; `sha256` settles once the stream is read. */
  exportSnapshot(
    snapshotId: string,
  ): Promise<{ sizeBytes: number; stream: ReadableStream<Uint8Array>; sha256: Promise<string> }>
  /**
   * Fetches a snapshot's image straight from the agent holding it (`from.url`, signed by the
   * control plane with that agent's credential), or from the shared image store; kept only if its
   * bytes hash to `from.sha256` (the control plane's record), else nothing is kept.
   */
  pullSnapshot(snapshotId: string, from: ImageSource): Promise<void>
  /**
   * Fetches the rootfs a template build made on another host (`rootfs`, the `built-…` name a
   * `TEMPLATE_UNAVAILABLE` error's details give) straight from an agent that has it (`from.url`,
   * signed like a snapshot's), owners and modes kept; unpacked only once the whole stream hashed to
   * `from.sha256` and every entry stays inside it; kept until the template goes.
   */
  pullRootfs(rootfs: string, from: { url: string; sha256: string | null }): Promise<void>
  /**
   * Takes in a snapshot another host exported (relayed by the control plane); rejects (keeping
   * nothing) unless the bytes match `sha256` (the control plane's record when it has one).
   */
  importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>): Promise<void>
  /**
   * Copies a snapshot's image into the shared image store (`FORKBOX_IMAGE_STORE`), from where any
   * host mounting it can pull it (`{ store: true }`) even once this one is gone. False: no store.
   */
  storeSnapshot(snapshotId: string): Promise<boolean>
  /** Removes this host's copy; `stored`: the shared store's too (the snapshot is gone for good). */
  deleteSnapshot(snapshotId: string, opts?: { stored?: boolean }): Promise<void>
  /** Removes every stored snapshot not in `keep` (after a crash, what no record owns). */
  pruneSnapshots(keep: string[]): Promise<void>
  /**
   * Freezes the sandbox (its freezer cgroup: no CPU at all) if it is quiet — no call, stream or
   * terminal open, and little CPU used since the last look (the first look only measures). Any
   * later call on it thaws it first. True when it is frozen.
   */
  freeze(id: string): Promise<boolean>
  /** Stops the sandbox at once; the slow teardown continues in the background. */
  stop(id: string): Promise<void>
  /** CPU and memory of each running sandbox (from its cgroup). */
  usage(): Promise<SandboxUsage[]>
  /** Replaces a running sandbox's egress policy; in force when this resolves (open flows it no longer allows are cut). */
  setNetwork(id: string, policy: EgressPolicy): Promise<void>
  /** The address the control plane reaches the sandbox's ports on (on the agent's host). */
  sandboxAddress(id: string): Promise<string>
  /**
   * A TCP connection from the agent's host to port `port` of the sandbox, as bytes both ways: how
   * a control plane on another machine reaches exposed ports. Flow controlled: the agent reads no
   * more while `onData` has not settled.
   */
  connectPort(id: string, port: number, onData: (chunk: Uint8Array) => void | Promise<void>): Promise<PortConnection>
  /** Restored, unclaimed sandboxes waiting in each template's pool. */
  poolSizes(): Promise<Record<string, number>>
  /** Sandboxes running now, including those re-attached after a restart. */
  liveIds(): Promise<string[]>
  onExit(listener: SandboxExitListener): void
  close(): Promise<void>
}

/** The `AgentApi` methods a remote agent serves over the wire (`onExit` is an event, `close` stays local). */
export const agentRemoteMethods = [
  'templates',
  'ensureTemplate',
  'buildTemplate',
  'registerTemplates',
  'removeTemplate',
  'pruneTemplates',
  'start',
  'snapshot',
  'fork',
  'exportSnapshot',
  'importSnapshot',
  'pullSnapshot',
  'pullRootfs',
  'storeSnapshot',
  'deleteSnapshot',
  'pruneSnapshots',
  'freeze',
  'stop',
  'usage',
  'setNetwork',
  'sandboxAddress',
  'connectPort',
  'poolSizes',
  'liveIds',
] as const satisfies readonly (keyof AgentApi)[]

/** One of the methods an agent serves to a control plane on another machine. */
export type AgentRemoteMethod = (typeof agentRemoteMethods)[number]
/** `AgentApi`'s remote methods, with their signatures as `AgentApi` gives them. */
export type AgentRemoteCalls = Pick<AgentApi, AgentRemoteMethod>

/** `AgentApi`'s remote methods, each a `call` of its name with its arguments: the client side of the seam. */
export function agentRemoteCalls(
  call: (method: AgentRemoteMethod, args: unknown[]) => Promise<unknown>,
): AgentRemoteCalls {
  return methodCalls<AgentApi, AgentRemoteMethod>(agentRemoteMethods, call)
}

/** Fails to compile when `AgentApi` gains a method the list above does not carry. */
type Unlisted = Exclude<keyof AgentApi, (typeof agentRemoteMethods)[number] | 'sandbox' | 'onExit' | 'close'>
export const agentRemoteMethodsComplete: [Unlisted] extends [never] ? true : never = true
