// Many hosts as one agent: the control plane's services call this `AgentApi`, and it places new
// sandboxes on a host and sends every other call to the host the sandbox (or snapshot) is on.
import { createHmac, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import type {
  AgentApi,
  BuildLogLine,
  EgressPolicy,
  FileEntry,
  ForkOptions,
  ForkOutcome,
  GuestContextOp,
  GuestContextOps,
  GuestExecOutput,
  GuestExecRequest,
  GuestFileOp,
  GuestFileOps,
  GuestProcessOp,
  GuestProcessOps,
  GuestRunCodeOutput,
  GuestRunCodeRequest,
  HostCapacity,
  PortConnection,
  ProcessExit,
  PruneOptions,
  PtySession,
  PtySpec,
  RegistryAuth,
  RunCodeHandlers,
  SandboxExitListener,
  SandboxUsage,
  SnapshotOptions,
  StartSandboxSpec,
  StreamHandlers,
  TemplateBuildResult,
  TemplateBuildSpec,
  TemplateInfo,
  TemplateProgress,
  TemplatePruneResult,
} from '@forkbox/protocol'
import { AppError, uploadOf, withUpload } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { HostRow, HostStore, Placed } from './hosts-store.ts'
import { type Candidate, rankHosts } from './placement.ts'
import { RemoteAgent } from './remote-agent.ts'

/** The shared image store a host mounts (its id), if any. */
function storeOf(row: HostRow): string | undefined {
  return (JSON.parse(row.capacity) as HostCapacity).imageStore
}

/** Adds a sandbox's reservation to what `placed` says host `host` holds. */
function bump(placed: Map<string, Placed>, host: string, r: { vcpus: number; memoryMB: number }): void {
  const p = placed.get(host) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 }
  placed.set(host, { ...p, sandboxes: p.sandboxes + 1, vcpus: p.vcpus + r.vcpus, memoryMB: p.memoryMB + r.memoryMB })
}

/** Whether two hosts mount the same image store. */
function sameStore(a: HostRow, b: HostRow): boolean {
  const store = storeOf(a)
  return store !== undefined && store === storeOf(b)
}

/** What a sandbox holds of its host: its vCPUs and memory limit. */
function reservationOf(spec: { resources: { vcpus: number; memoryMB: number } }): { vcpus: number; memoryMB: number } {
  return { vcpus: spec.resources.vcpus, memoryMB: spec.resources.memoryMB }
}

async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader()
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) yield r.value
  } finally {
    reader.releaseLock()
  }
}

/** How long an agent may use the URL it is given to pull an image from a peer. */
const IMAGE_URL_VALID_MS = 5 * 60_000

/** What a peer shows the holding agent to read image `snapshotId` until `expires` (the agent checks the same HMAC). */
export function imageSignature(credential: string, snapshotId: string, expires: number): string {
  return createHmac('sha256', credential).update(`forkbox-image\0${snapshotId}\0${expires}`).digest('base64url')
}

/** A host's secret, derived from the server secret and its join's nonce: every replica knows it, nothing stores it. */
export function hostCredential(secret: Buffer, id: string, nonce: string): string {
  return createHmac('sha256', secret).update(`forkbox-host\0${id}\0${nonce}`).digest('base64url')
}

export interface FleetOptions {
  /** A host with no heartbeat for this long takes no new sandboxes and counts as unreachable. */
  graceMs: number
  log: Logger
}

const HOSTS_CACHE_MS = 1_000
const TEMPLATES_CACHE_MS = 2_000
const PLACED_CACHE_MS = 1_000

export class Fleet implements AgentApi {
  private readonly remotes = new Map<string, { key: string; agent: RemoteAgent }>()
  private readonly exitListeners: SandboxExitListener[] = []
  private hostsCache: { at: number; rows: Promise<HostRow[]> } | null = null
  private closed = false

  constructor(
    private readonly hosts: HostStore,
    private readonly secret: Buffer,
    private readonly opts: FleetOptions,
  ) {}

  // ---- hosts ----

  private rows(): Promise<HostRow[]> {
    const now = Date.now()
    if (!this.hostsCache || now - this.hostsCache.at > HOSTS_CACHE_MS) {
      const rows = this.hosts.list()
      rows.catch(() => {
        if (this.hostsCache?.rows === rows) this.hostsCache = null
      })
      this.hostsCache = { at: now, rows }
    }
    return this.hostsCache.rows
  }

  /** The next read sees the store as it is now (after a join, a cordon). */
  forgetHosts(): void {
    this.hostsCache = null
  }

  isFresh(row: HostRow): boolean {
    return Date.now() - Date.parse(row.heartbeat_at) <= this.opts.graceMs
  }

  /** Hosts whose heartbeats stopped (past the grace period). */
  async silentHosts(): Promise<string[]> {
    return (await this.rows()).filter((r) => !this.isFresh(r)).map((r) => r.id)
  }

  /** Hosts that answer heartbeats (cordoned ones included: they still serve what they hold). */
  private async reachable(): Promise<HostRow[]> {
    return (await this.rows()).filter((r) => this.isFresh(r))
  }

  private remote(row: HostRow): RemoteAgent {
    const key = `${row.url}\0${row.nonce}`
    const known = this.remotes.get(row.id)
    if (known?.key === key) return known.agent
    known?.agent.close().catch(() => {})
    const agent = new RemoteAgent({
      url: row.url,
      name: row.id,
      credential: async () => hostCredential(this.secret, row.id, row.nonce),
    })
    agent.onExit((id, reason, message) => {
      // a sandbox that died on its own frees its room; a stop's own exit is left to `stop` (the
      // same id may already be starting again, woken)
      if (reason)
        this.hosts.unplace(id).catch((err: unknown) => this.opts.log.error({ err, sandboxId: id }, 'unplacing failed'))
      for (const l of this.exitListeners) l(id, reason, message)
    })
    this.remotes.set(row.id, { key, agent })
    return agent
  }

  /** The agent of host `id` (as the store has it now). */
  async agentOf(hostId: string): Promise<RemoteAgent> {
    const row = (await this.rows()).find((r) => r.id === hostId) ?? (await this.hosts.get(hostId))
    if (!row) throw new AppError('HOST_UNREACHABLE', `no host ${hostId}`, { host: hostId })
    return this.remote(row)
  }

  /** The agent holding sandbox or snapshot `id`. */
  private async holder(id: string, missing: () => AppError): Promise<RemoteAgent> {
    const host = await this.hosts.hostOf(id)
    if (!host) throw missing()
    return this.agentOf(host)
  }

  private onSandbox(id: string): Promise<RemoteAgent> {
    return this.holder(id, () => new AppError('SANDBOX_NOT_RUNNING', `sandbox ${id} is not running`))
  }

  /** Every reachable host's agent, each call's failure logged and left out. */
  private async each<T>(what: string, fn: (a: RemoteAgent, host: string) => Promise<T>): Promise<T[]> {
    const rows = await this.reachable()
    const settled = await Promise.allSettled(rows.map((r) => fn(this.remote(r), r.id)))
    const out: T[] = []
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') out.push(s.value)
      else if (s.reason instanceof AppError && s.reason.code === 'HOST_UNREACHABLE')
        this.opts.log.debug({ host: rows[i]?.id }, `${what}: host unreachable`)
      else this.opts.log.warn({ host: rows[i]?.id, err: s.reason }, `${what} failed on a host`)
    })
    return out
  }

  /**
   * What is placed on each host, read from the store at most once a second (an aggregate over
   * every placement: at 100,000 sandboxes, too much for each create) plus what this replica
   * placed since.
   */
  private async placedNow(): Promise<Map<string, Placed>> {
    const now = Date.now()
    if (!this.placedCache) {
      const map = this.hosts.placed()
      map.catch(() => {
        if (this.placedCache?.map === map) this.placedCache = null
      })
      this.placedCache = { at: now, map }
    } else if (now - this.placedCache.at > PLACED_CACHE_MS && !this.placedRefresh) {
      // read again in the background: creates go on with the last figures meanwhile (the read
      // takes a few hundred ms at 100,000 placements)
      const stamp = now
      this.placedRefresh = this.hosts
        .placed()
        .then((map) => {
          this.placedCache = { at: stamp, map: Promise.resolve(map) }
        })
        .catch(() => {})
        .finally(() => {
          this.placedRefresh = null
        })
    }
    return this.placedCache.map
  }

  /** Counts a placement this replica just made until the next read of the store. */
  private async reserved(host: string, r: { vcpus: number; memoryMB: number }): Promise<void> {
    const map = await this.placedNow().catch(() => null)
    if (map) bump(map, host, r)
  }

  /** Hosts that can take a sandbox like `spec`, best first (a restore from a snapshot: by load alone). */
  private async rank(
    spec: {
      template: string
      snapshot?: string
      resources: { vcpus: number; memoryMB: number }
    },
    opts: { reserveFirst?: boolean } = {},
  ): Promise<string[]> {
    const placed = await this.placedNow()
    const template = spec.snapshot ? undefined : spec.template
    const candidates: Candidate[] = (await this.reachable())
      .filter((r) => r.state === 'ready')
      .map((r) => ({
        id: r.id,
        capacity: this.poolAfterClaims(r, template),
        placed: placed.get(r.id) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 },
      }))
    const ranked = rankHosts(candidates, { ...reservationOf(spec), template })
    const [first] = ranked
    if (opts.reserveFirst && first) {
      // counted before anything else runs: creates ranked at the same moment see each other
      // (between here and their placement in the store there are awaits)
      bump(placed, first, reservationOf(spec))
      if (template !== undefined) this.claimed(first, template)
    }
    return ranked
  }

  /**
   * A host's capacity less the pooled sandboxes of `template` this replica took there since its
   * last heartbeat: without it a burst of creates all goes to the host that had a full pool.
   */
  private poolAfterClaims(row: HostRow, template: string | undefined): HostCapacity {
    const capacity = JSON.parse(row.capacity) as HostCapacity
    const pooled = template === undefined ? 0 : (capacity.pool[template] ?? 0)
    if (pooled === 0) return capacity
    const since = Date.parse(row.heartbeat_at)
    const taken = this.poolClaims.filter((c) => c.host === row.id && c.template === template && c.at >= since).length
    return { ...capacity, pool: { ...capacity.pool, [template as string]: Math.max(0, pooled - taken) } }
  }

  /** Pooled sandboxes taken lately (for `poolAfterClaims`), the last minute's. */
  private readonly poolClaims: { host: string; template: string; at: number }[] = []

  private claimed(host: string, template: string): void {
    const now = Date.now()
    while ((this.poolClaims[0]?.at ?? now) < now - 60_000) this.poolClaims.shift()
    this.poolClaims.push({ host, template, at: now })
  }

  // ---- templates ----

  /** Every create reads the templates: asking every host each time would cost a round trip per host. */
  private templatesCache: { at: number; list: Promise<TemplateInfo[]> } | null = null
  private placedCache: { at: number; map: Promise<Map<string, Placed>> } | null = null
  private placedRefresh: Promise<void> | null = null

  templates(): Promise<TemplateInfo[]> {
    const now = Date.now()
    if (!this.templatesCache || now - this.templatesCache.at > TEMPLATES_CACHE_MS) {
      const list = this.listTemplates()
      list.catch(() => {
        if (this.templatesCache?.list === list) this.templatesCache = null
      })
      this.templatesCache = { at: now, list }
    }
    return this.templatesCache.list
  }

  private async listTemplates(): Promise<TemplateInfo[]> {
    const byName = new Map<string, TemplateInfo>()
    for (const list of await this.each('listing templates', (a) => a.templates()))
      for (const t of list) {
        const seen = byName.get(t.name)
        if (!seen || (!seen.ready && t.ready)) byName.set(t.name, t)
      }
    return [...byName.values()]
  }

  async ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    this.templatesCache = null
    const rows = (await this.reachable()).filter((r) => r.state === 'ready')
    await Promise.all(rows.map((r) => this.remote(r).ensureTemplate(name, onProgress)))
  }

  async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
  ): Promise<TemplateBuildResult> {
    this.templatesCache = null
    const [host] = await this.rank({ template: spec.name, resources: spec.resources.defaults })
    if (!host) throw new AppError('NO_CAPACITY', 'no host can take a build now')
    // its upload is on this replica's disk: the bytes go along, the path means nothing there
    const upload = uploadOf(spec)
    const result = await (await this.agentOf(host)).buildTemplate(
      upload ? withUpload(spec, undefined) : spec,
      onLog,
      signal,
      registryAuth,
      upload ? createReadStream(upload, { highWaterMark: 1024 * 1024 }) : undefined,
    )
    // the others build it from the pinned spec when a sandbox of it lands there
    await this.each('registering a template', (a, h) =>
      h === host ? Promise.resolve() : a.registerTemplates([result.pinned]),
    )
    return result
  }

  async registerTemplates(specs: TemplateBuildSpec[]): Promise<void> {
    this.templatesCache = null
    await this.each('registering templates', (a) => a.registerTemplates(specs))
  }

  async removeTemplate(name: string): Promise<void> {
    this.templatesCache = null
    await this.each('removing a template', (a) => a.removeTemplate(name))
  }

  async pruneTemplates(opts?: PruneOptions): Promise<TemplatePruneResult> {
    const all = await this.each('pruning templates', async (a, host) => {
      const r = await a.pruneTemplates(opts)
      return { removed: r.removed.map((p) => `${host}:${p}`), freedBytes: r.freedBytes }
    })
    return { removed: all.flatMap((r) => r.removed), freedBytes: all.reduce((n, r) => n + r.freedBytes, 0) }
  }

  // ---- sandboxes ----

  async start(spec: StartSandboxSpec, signal?: AbortSignal): Promise<void> {
    if (spec.snapshot) {
      // the host holding the image, when it can take the sandbox; else the best other, with a copy
      const holder = await this.hosts.hostOf(spec.snapshot)
      if (!holder) throw new AppError('SNAPSHOT_NOT_FOUND', `no image of snapshot ${spec.snapshot} on any host`)
      const ranked = await this.rank(spec)
      const target = ranked.includes(holder) ? holder : ranked[0]
      if (!target) throw this.noCapacity(spec)
      await this.reserved(target, reservationOf(spec))
      return this.restoreOn(target, holder, { ...spec, snapshot: spec.snapshot }, signal)
    }
    const ranked = await this.rank(spec, { reserveFirst: true })
    if (ranked.length === 0) throw this.noCapacity(spec)
    const reserve = reservationOf(spec)
    for (const [i, host] of ranked.entries()) {
      await this.hosts.place(spec.id, 'sandbox', host, reserve)
      if (i > 0) {
        await this.reserved(host, reserve)
        this.claimed(host, spec.template)
      }
      try {
        return await (await this.agentOf(host)).start(spec, signal)
      } catch (err) {
        await this.hosts.unplace(spec.id)
        // a host that cannot be reached started nothing: the next one may
        const unreachable = err instanceof AppError && err.code === 'HOST_UNREACHABLE'
        if (!unreachable || i === ranked.length - 1 || signal?.aborted) throw err
        this.opts.log.warn({ host, sandboxId: spec.id }, 'host unreachable at create; trying the next')
      }
    }
  }

  private noCapacity(spec: Pick<StartSandboxSpec, 'resources'>): AppError {
    return new AppError('NO_CAPACITY', 'no host has room for this sandbox now', reservationOf(spec))
  }

  /** Starts `spec` on `target` from its snapshot on `holder`: copied there first, the copy dropped after. */
  private async restoreOn(
    target: string,
    holder: string,
    spec: StartSandboxSpec & { snapshot: string },
    signal?: AbortSignal,
  ): Promise<void> {
    await this.hosts.place(spec.id, 'sandbox', target, reservationOf(spec))
    const agent = await this.agentOf(target)
    try {
      if (target !== holder) await this.copyImage(spec.snapshot, holder, target)
      await agent.start(spec, signal)
    } catch (err) {
      await this.hosts.unplace(spec.id)
      throw err
    } finally {
      // a restore reads its image whole: the copy is not needed once it settled
      if (target !== holder) await agent.deleteSnapshot(spec.snapshot).catch(() => {})
    }
  }

  /**
   * Copies a snapshot's image from one host to another, hash-checked by the receiver: pulled by
   * it straight from the holder (signed for a few minutes with the holder's credential), or, when
   * that fails, relayed through this control plane.
   */
  async copyImage(snapshotId: string, from: string, to: string): Promise<void> {
    const holder = (await this.rows()).find((r) => r.id === from) ?? (await this.hosts.get(from))
    const target = (await this.rows()).find((r) => r.id === to)
    const shared = holder !== undefined && target !== undefined && sameStore(holder, target)
    // a silent holder is not waited for when the image store has the image
    if (shared && !this.isFresh(holder)) return this.pullStored(snapshotId, to)
    try {
      await this.copyFromHolder(snapshotId, holder, from, to)
    } catch (err) {
      if (!shared) throw err
      this.opts.log.warn(
        { snapshotId, from, to, err: String(err) },
        'the image holder failed; pulling it from the image store',
      )
      await this.pullStored(snapshotId, to).catch(() => {
        throw err
      })
    }
  }

  private async pullStored(snapshotId: string, to: string): Promise<void> {
    const started = performance.now()
    await (await this.agentOf(to)).pullSnapshot(snapshotId, { store: true })
    this.opts.log.info(
      { snapshotId, to, ms: Math.round(performance.now() - started) },
      'image pulled from the image store',
    )
  }

  private async copyFromHolder(
    snapshotId: string,
    holder: HostRow | undefined,
    from: string,
    to: string,
  ): Promise<void> {
    const started = performance.now()
    if (holder) {
      const expires = Date.now() + IMAGE_URL_VALID_MS
      const sig = imageSignature(hostCredential(this.secret, holder.id, holder.nonce), snapshotId, expires)
      const url = new URL(`/v1/agent/images/${encodeURIComponent(snapshotId)}`, holder.url)
      url.searchParams.set('expires', String(expires))
      url.searchParams.set('sig', sig)
      try {
        await (await this.agentOf(to)).pullSnapshot(snapshotId, { url: url.toString() })
        this.opts.log.info(
          { snapshotId, from, to, ms: Math.round(performance.now() - started) },
          'image pulled between hosts',
        )
        return
      } catch (err) {
        this.opts.log.warn({ snapshotId, from, to, err: String(err) }, 'direct image pull failed; relaying it')
      }
    }
    const image = await (await this.agentOf(from)).exportSnapshot(snapshotId)
    await (await this.agentOf(to)).importSnapshot(snapshotId, chunksOf(image.stream), image.sha256)
    this.opts.log.info(
      { snapshotId, from, to, bytes: image.sizeBytes, ms: Math.round(performance.now() - started) },
      'image copied between hosts',
    )
  }

  /** Where an image leaving host `from` goes: the reachable, uncordoned host with the most free disk. */
  async imageTarget(from: string): Promise<string> {
    const best = (await this.reachable())
      .filter((r) => r.id !== from && r.state === 'ready')
      .map((r) => ({ id: r.id, free: (JSON.parse(r.capacity) as HostCapacity).diskFreeBytes }))
      .sort((a, b) => b.free - a.free)[0]
    if (!best) throw new AppError('NO_CAPACITY', 'no other host can take the image')
    return best.id
  }

  /** Moves a snapshot's image to another host: copied, placed there, removed from the first. */
  async moveImage(snapshotId: string, to: string): Promise<void> {
    const from = await this.hosts.hostOf(snapshotId)
    if (!from || from === to) return
    await this.copyImage(snapshotId, from, to)
    await this.hosts.place(snapshotId, 'snapshot', to, { vcpus: 0, memoryMB: 0 })
    await (await this.agentOf(from)).deleteSnapshot(snapshotId).catch(() => {})
  }

  async exec(
    id: string,
    req: GuestExecRequest,
    signal?: AbortSignal,
    stream?: StreamHandlers,
  ): Promise<GuestExecOutput> {
    return (await this.onSandbox(id)).exec(id, req, signal, stream)
  }
  async startProcess(id: string, req: GuestExecRequest): Promise<{ pid: number }> {
    return (await this.onSandbox(id)).startProcess(id, req)
  }
  async attachProcess(
    id: string,
    pid: number,
    opts: { offset?: number; output?: boolean },
    handlers: StreamHandlers,
    signal?: AbortSignal,
  ): Promise<ProcessExit | null> {
    return (await this.onSandbox(id)).attachProcess(id, pid, opts, handlers, signal)
  }
  async processOp<R extends GuestProcessOp>(id: string, req: R): Promise<GuestProcessOps[R['op']]['res']> {
    return (await this.onSandbox(id)).processOp(id, req)
  }
  async openPty(id: string, spec: PtySpec, onData: (chunk: Uint8Array) => void | Promise<void>): Promise<PtySession> {
    return (await this.onSandbox(id)).openPty(id, spec, onData)
  }
  async readFile(id: string, path: string, user?: string) {
    return (await this.onSandbox(id)).readFile(id, path, user)
  }
  async writeFile(
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    opts?: { mode?: number; user?: string },
  ): Promise<FileEntry> {
    return (await this.onSandbox(id)).writeFile(id, path, body, opts)
  }
  async fileOp<R extends GuestFileOp>(id: string, req: R): Promise<GuestFileOps[R['op']]['res']> {
    return (await this.onSandbox(id)).fileOp(id, req)
  }
  async runCode(
    id: string,
    req: GuestRunCodeRequest,
    handlers?: RunCodeHandlers,
    signal?: AbortSignal,
  ): Promise<GuestRunCodeOutput> {
    return (await this.onSandbox(id)).runCode(id, req, handlers, signal)
  }
  async codeContext<R extends GuestContextOp>(id: string, req: R): Promise<GuestContextOps[R['op']]['res']> {
    return (await this.onSandbox(id)).codeContext(id, req)
  }

  /** A snapshot or a hibernation's image; copied to the shared image store, if any, in the background. */
  async snapshot(id: string, snapshotId: string, opts?: SnapshotOptions): Promise<{ sizeBytes: number }> {
    const { host, sizeBytes } = await this.checkpoint(id, snapshotId, opts)
    this.storeInBackground(host, snapshotId)
    return { sizeBytes }
  }

  private async checkpoint(
    id: string,
    snapshotId: string,
    opts?: SnapshotOptions,
  ): Promise<{ host: string; sizeBytes: number }> {
    const host = await this.hosts.hostOf(id)
    if (!host) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${id} is not running`)
    await this.hosts.place(snapshotId, 'snapshot', host, { vcpus: 0, memoryMB: 0 })
    try {
      return { host, ...(await (await this.agentOf(host)).snapshot(id, snapshotId, opts)) }
    } catch (err) {
      await this.hosts.unplace(snapshotId)
      throw err
    }
  }

  /** Images being written to the shared store, by snapshot id (a delete waits for its write). */
  private readonly storing = new Map<string, Promise<void>>()

  private storeInBackground(host: string, snapshotId: string): void {
    const write = (async () => {
      const row = (await this.rows()).find((r) => r.id === host)
      if (!row || !storeOf(row)) return
      const started = performance.now()
      if (await (await this.agentOf(host)).storeSnapshot(snapshotId))
        this.opts.log.info(
          { snapshotId, host, ms: Math.round(performance.now() - started) },
          'image written to the image store',
        )
    })()
      .catch((err: unknown) =>
        this.opts.log.warn({ snapshotId, host, err: String(err) }, 'writing an image to the image store failed'),
      )
      .finally(() => this.storing.delete(snapshotId))
    this.storing.set(snapshotId, write)
  }

  async fork(
    sourceId: string,
    children: Omit<StartSandboxSpec, 'snapshot'>[],
    opts?: ForkOptions,
  ): Promise<ForkOutcome[]> {
    const host = await this.hosts.hostOf(sourceId)
    if (!host) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${sourceId} is not running`)
    const [first] = children
    const beside = first ? (await this.rank({ ...first, snapshot: sourceId })).includes(host) : true
    if (opts?.spread || !beside) return this.forkAcross(host, sourceId, children, opts)
    for (const c of children) {
      await this.hosts.place(c.id, 'sandbox', host, reservationOf(c))
      await this.reserved(host, reservationOf(c))
    }
    let outcomes: ForkOutcome[]
    try {
      outcomes = await (await this.agentOf(host)).fork(sourceId, children, opts)
    } catch (err) {
      for (const c of children) await this.hosts.unplace(c.id)
      throw err
    }
    for (const o of outcomes) if (o.error) await this.hosts.unplace(o.id)
    return outcomes
  }

  /**
   * Forks on other hosts too: the source checkpointed once on its host, then each fork placed
   * (least loaded first, counting the ones placed before it; with `spread`, a host no fork of this
   * call took yet first) and restored there from a copy.
   */
  private async forkAcross(
    host: string,
    sourceId: string,
    children: Omit<StartSandboxSpec, 'snapshot'>[],
    opts: ForkOptions = {},
  ): Promise<ForkOutcome[]> {
    const snapshotId = `fork-${randomBytes(10).toString('hex')}`
    // read once by the forks and deleted: not worth the image store
    await this.checkpoint(sourceId, snapshotId)
    try {
      await opts.onCheckpointed?.()
      const targets: (string | null)[] = []
      // spread: each fork on a host of its own, other than the source's, while there are such hosts
      const used = new Set([host])
      for (const c of children) {
        const ranked = await this.rank({ ...c, snapshot: snapshotId })
        const best = (opts.spread ? ranked.find((h) => !used.has(h)) : undefined) ?? ranked[0]
        if (best) used.add(best)
        targets.push(best ?? null)
        // counted now, so the next fork's ranking sees it (restoreOn records the placement)
        if (best) await this.reserved(best, reservationOf(c))
      }
      return await Promise.all(
        children.map(async (c, i): Promise<ForkOutcome> => {
          const target = targets[i]
          if (!target) return { id: c.id, error: this.noCapacity(c) }
          try {
            await this.restoreOn(target, host, { ...c, snapshot: snapshotId }, opts.signal)
            return { id: c.id, error: null }
          } catch (err) {
            return { id: c.id, error: err instanceof Error ? err : new AppError('INTERNAL', String(err)) }
          }
        }),
      )
    } finally {
      await this.deleteSnapshot(snapshotId).catch(() => {})
    }
  }

  async exportSnapshot(snapshotId: string) {
    const host = await this.hosts.hostOf(snapshotId)
    if (!host) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${snapshotId}`)
    return (await this.agentOf(host)).exportSnapshot(snapshotId)
  }

  async importSnapshot(): Promise<void> {
    throw new AppError('NOT_IMPLEMENTED', 'a fleet places images itself (copyImage, moveImage)')
  }

  async pullSnapshot(): Promise<void> {
    throw new AppError('NOT_IMPLEMENTED', 'a fleet places images itself (copyImage, moveImage)')
  }

  /** The snapshot is gone for good: its holder's image, and the shared store's copy. */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    const host = await this.hosts.hostOf(snapshotId)
    if (!host) return
    await this.storing.get(snapshotId)
    try {
      await (await this.agentOf(host)).deleteSnapshot(snapshotId, { stored: true })
    } catch (err) {
      // its host is gone: the store's copy goes through another host that mounts it
      const holder = (await this.rows()).find((r) => r.id === host)
      const other = (await this.reachable()).find((r) => r.id !== host && holder && sameStore(r, holder))
      if (!other) throw err
      await this.remote(other).deleteSnapshot(snapshotId, { stored: true })
    }
    await this.hosts.unplace(snapshotId)
  }

  async storeSnapshot(): Promise<boolean> {
    throw new AppError('NOT_IMPLEMENTED', 'a fleet stores images itself (snapshot)')
  }

  async pruneSnapshots(keep: string[]): Promise<void> {
    await this.each('pruning snapshots', (a) => a.pruneSnapshots(keep))
  }

  async stop(id: string): Promise<void> {
    const host = await this.hosts.hostOf(id)
    if (!host) return
    await (await this.agentOf(host)).stop(id)
    await this.hosts.unplace(id)
  }

  async usage(): Promise<SandboxUsage[]> {
    return (await this.each('reading usage', (a) => a.usage())).flat()
  }

  async setNetwork(id: string, policy: EgressPolicy): Promise<void> {
    return (await this.onSandbox(id)).setNetwork(id, policy)
  }

  async sandboxAddress(id: string): Promise<string> {
    return (await this.onSandbox(id)).sandboxAddress(id)
  }

  async connectPort(
    id: string,
    port: number,
    onData: (chunk: Uint8Array) => void | Promise<void>,
  ): Promise<PortConnection> {
    return (await this.onSandbox(id)).connectPort(id, port, onData)
  }

  async poolSizes(): Promise<Record<string, number>> {
    const out: Record<string, number> = {}
    for (const sizes of await this.each('reading pools', (a) => a.poolSizes()))
      for (const [t, n] of Object.entries(sizes)) out[t] = (out[t] ?? 0) + n
    return out
  }

  /** Running sandboxes of every host; those placed on a host that does not answer now count as live (they may well be). */
  async liveIds(): Promise<string[]> {
    const ids = new Set<string>()
    for (const row of await this.rows()) {
      const live = this.isFresh(row)
        ? await this.remote(row)
            .liveIds()
            .catch(() => null)
        : null
      for (const id of live ?? (await this.hosts.placedOn(row.id, 'sandbox'))) ids.add(id)
    }
    return [...ids]
  }

  onExit(listener: SandboxExitListener): void {
    this.exitListeners.push(listener)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all([...this.remotes.values()].map((r) => r.agent.close()))
    this.remotes.clear()
  }
}
