// Many hosts as one agent: the control plane's services call this `AgentApi`, and it places new
// sandboxes on a host and sends every other call to the host the sandbox (or snapshot) is on.
import { randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import type {
  AgentApi,
  AgentSandbox,
  BuildLogLine,
  EgressPolicy,
  ForkOptions,
  ForkOutcome,
  PortConnection,
  PruneOptions,
  RegistryAuth,
  SandboxExitListener,
  SandboxUsage,
  SnapshotOptions,
  StartSandboxSpec,
  TemplateBuildResult,
  TemplateBuildSpec,
  TemplateInfo,
  TemplateProgress,
  TemplatePruneResult,
} from '@forkbox/protocol'
import { AppError, agentSandboxCalls, SHA256_HEX, uploadOf, withUpload } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { HostRow, HostStore } from './hosts-store.ts'
import { Images, missingTemplateImage } from './images.ts'
import { HostLinks } from './links.ts'
import { Placer, reservationOf } from './placer.ts'
import type { RemoteAgent } from './remote-agent.ts'

export { imageSignature } from './images.ts'
export { hostCredential } from './links.ts'

export interface FleetOptions {
  /** A host with no heartbeat for this long takes no new sandboxes and counts as unreachable. */
  graceMs: number
  log: Logger
}

const TEMPLATES_CACHE_MS = 2_000

export class Fleet implements AgentApi {
  private readonly links: HostLinks
  private readonly placer: Placer
  private readonly images: Images

  constructor(
    private readonly hosts: HostStore,
    secret: Buffer,
    private readonly opts: FleetOptions,
  ) {
    this.links = new HostLinks(hosts, secret, opts)
    this.placer = new Placer(hosts, () => this.links.reachable())
    this.images = new Images(this.links, hosts, secret, opts.log)
  }

  // ---- hosts ----

  /** The next read sees the store as it is now (after a join, a cordon). */
  forgetHosts(): void {
    this.links.forgetHosts()
  }

  isFresh(row: HostRow): boolean {
    return this.links.isFresh(row)
  }

  /** Hosts whose heartbeats stopped (past the grace period). */
  async silentHosts(): Promise<string[]> {
    return (await this.links.rows()).filter((r) => !this.links.isFresh(r)).map((r) => r.id)
  }

  /** The agent of host `id` (as the store has it now). */
  agentOf(hostId: string): Promise<RemoteAgent> {
    return this.links.agentOf(hostId)
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

  // ---- templates ----

  /**
   * Every create of a built-in reads the templates: asking every host each time would cost a round
   * trip per host. A list older than a couple of seconds is still answered at once while a fresh
   * one is asked for (what a create needs of it — resources, ports — does not change; a template
   * it lacks or that is not ready is asked for again through `ensureTemplate`, which drops it).
   */
  private templatesCache: { at: number; list: Promise<TemplateInfo[]>; refreshing?: boolean } | null = null

  templates(): Promise<TemplateInfo[]> {
    const cached = this.templatesCache
    if (!cached) return this.refreshTemplates()
    if (Date.now() - cached.at > TEMPLATES_CACHE_MS && !cached.refreshing) {
      cached.refreshing = true
      this.refreshTemplates().catch(() => {})
    }
    return cached.list
  }

  private refreshTemplates(): Promise<TemplateInfo[]> {
    const list = this.listTemplates()
    list.then(
      () => {
        if (!this.templatesCache || this.templatesCache.list !== list) this.templatesCache = { at: Date.now(), list }
      },
      () => {
        if (this.templatesCache?.list === list) this.templatesCache = null
        else if (this.templatesCache) this.templatesCache.refreshing = false
      },
    )
    if (!this.templatesCache) this.templatesCache = { at: Date.now(), list }
    return list
  }

  private async listTemplates(): Promise<TemplateInfo[]> {
    const byName = new Map<string, TemplateInfo>()
    for (const list of await this.links.each('listing templates', (a) => a.templates()))
      for (const t of list) {
        const seen = byName.get(t.name)
        if (!seen || (!seen.ready && t.ready)) byName.set(t.name, t)
      }
    return [...byName.values()]
  }

  async ensureTemplate(name: string, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    this.templatesCache = null
    const rows = (await this.links.reachable()).filter((r) => r.state === 'ready')
    const results = await Promise.allSettled(rows.map((r) => this.links.remote(r).ensureTemplate(name, onProgress)))
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []))
    const other = failures.find((e) => !missingTemplateImage(e))
    if (other) throw other
    // a template built on another host is ready where its image is (the others copy it when a
    // sandbox lands there): it fails only when no host has it
    if (failures.length > 0 && failures.length === results.length) throw failures[0]
  }

  /**
   * Runs `call` (on `host`) again after copying there the template image it failed for lack of
   * (a template a user built on another host); any other failure is its own.
   */
  private async withTemplateImage<T>(
    host: string,
    call: () => Promise<T>,
    onCopy?: (template: string) => void,
  ): Promise<T> {
    try {
      return await call()
    } catch (err) {
      const missing = missingTemplateImage(err)
      if (!missing) throw err
      onCopy?.(missing.template)
      await this.images.copyRootfs(missing, host)
      return call()
    }
  }

  async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
  ): Promise<TemplateBuildResult> {
    this.templatesCache = null
    const [host] = await this.placer.rank({ template: spec.name, resources: spec.resources.defaults })
    if (!host) throw new AppError('NO_CAPACITY', 'no host can take a build now')
    // its upload is on this replica's disk: the bytes go along, the path means nothing there
    const upload = uploadOf(spec)
    const agent = await this.agentOf(host)
    // a FROM of a template built on another host: its image is copied here first
    const result = await this.withTemplateImage(
      host,
      () =>
        agent.buildTemplate(
          upload ? withUpload(spec, undefined) : spec,
          onLog,
          signal,
          registryAuth,
          upload ? createReadStream(upload, { highWaterMark: 1024 * 1024 }) : undefined,
        ),
      (template) => onLog({ stream: 'system', message: `copying template ${template} from the host that built it` }),
    )
    // the hash its builder reports now is what every other host's copy of its rootfs is checked against
    if (result.rootfs && SHA256_HEX.test(result.rootfs.sha256))
      await this.hosts.placeRootfs(result.rootfs.name, host, result.rootfs.sha256)
    // the others know it from its pinned spec, and copy its image when a sandbox of it lands there
    await this.links.each('registering a template', (a, h) =>
      h === host ? Promise.resolve() : a.registerTemplates([result.pinned]),
    )
    return result
  }

  async registerTemplates(specs: TemplateBuildSpec[]): Promise<void> {
    this.templatesCache = null
    await this.links.each('registering templates', (a) => a.registerTemplates(specs))
  }

  async removeTemplate(name: string): Promise<void> {
    this.templatesCache = null
    await this.links.each('removing a template', (a) => a.removeTemplate(name))
  }

  async pruneTemplates(opts?: PruneOptions): Promise<TemplatePruneResult> {
    const all = await this.links.each('pruning templates', async (a, host) => {
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
      const ranked = await this.placer.rank(spec)
      const target = ranked.includes(holder) ? holder : ranked[0]
      if (!target) throw this.noCapacity(spec)
      await this.placer.reserved(target, reservationOf(spec))
      return this.restoreOn(target, holder, { ...spec, snapshot: spec.snapshot }, signal)
    }
    const ranked = await this.placer.rank(spec, { reserveFirst: true })
    if (ranked.length === 0) throw this.noCapacity(spec)
    const reserve = reservationOf(spec)
    for (const [i, host] of ranked.entries()) {
      await this.hosts.place(spec.id, 'sandbox', host, reserve)
      if (i > 0) {
        await this.placer.reserved(host, reserve)
        this.placer.claimed(host, spec.template)
      }
      try {
        const agent = await this.agentOf(host)
        return await this.withTemplateImage(host, () => agent.start(spec, signal))
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
      if (target !== holder) await this.images.copyImage(spec.snapshot, holder, target)
      await this.withTemplateImage(target, () => agent.start(spec, signal))
    } catch (err) {
      await this.hosts.unplace(spec.id)
      throw err
    } finally {
      // a restore reads its image whole: the copy is not needed once it settled
      if (target !== holder) await agent.deleteSnapshot(spec.snapshot).catch(() => {})
    }
  }

  /** A sandbox's calls, sent to the agent of the host holding it (looked up on the handle's first call). */
  sandbox(id: string): AgentSandbox {
    let on: Promise<AgentSandbox> | null = null
    const resolve = () => {
      if (on) return on
      const looked = this.onSandbox(id).then((agent) => agent.sandbox(id))
      // a failed lookup is not kept: the handle's next call looks again
      looked.catch(() => {
        if (on === looked) on = null
      })
      on = looked
      return looked
    }
    return agentSandboxCalls(async (method, args) =>
      ((await resolve())[method] as (...a: unknown[]) => unknown)(...args),
    )
  }

  async snapshot(id: string, snapshotId: string, opts?: SnapshotOptions): Promise<{ sizeBytes: number }> {
    const { host, sizeBytes } = await this.checkpoint(id, snapshotId, opts)
    this.images.storeInBackground(host, snapshotId)
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
      // its hash, taken by the holder as it makes it, is what every copy to another host must match
      const { sizeBytes, sha256 } = await (await this.agentOf(host)).snapshot(id, snapshotId, { ...opts, digest: true })
      if (sha256 && SHA256_HEX.test(sha256)) await this.hosts.setDigest(snapshotId, sha256)
      return { host, sizeBytes }
    } catch (err) {
      await this.hosts.unplace(snapshotId)
      throw err
    }
  }

  async fork(
    sourceId: string,
    children: Omit<StartSandboxSpec, 'snapshot'>[],
    opts?: ForkOptions,
  ): Promise<ForkOutcome[]> {
    const host = await this.hosts.hostOf(sourceId)
    if (!host) throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${sourceId} is not running`)
    const [first] = children
    const beside = first ? (await this.placer.rank({ ...first, snapshot: sourceId })).includes(host) : true
    if (opts?.spread || !beside) return this.forkAcross(host, sourceId, children, opts)
    for (const c of children) {
      await this.hosts.place(c.id, 'sandbox', host, reservationOf(c))
      await this.placer.reserved(host, reservationOf(c))
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
        const ranked = await this.placer.rank({ ...c, snapshot: snapshotId })
        const best = (opts.spread ? ranked.find((h) => !used.has(h)) : undefined) ?? ranked[0]
        if (best) used.add(best)
        targets.push(best ?? null)
        // counted now, so the next fork's ranking sees it (restoreOn records the placement)
        if (best) await this.placer.reserved(best, reservationOf(c))
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

  async pullRootfs(): Promise<void> {
    throw new AppError('NOT_IMPLEMENTED', 'a fleet copies template images itself (on a create that needs one)')
  }

  /** The snapshot is gone for good: its holder's image, and the shared store's copy. */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    const host = await this.hosts.hostOf(snapshotId)
    if (!host) return
    await this.images.deleteEverywhere(snapshotId, host)
    await this.hosts.unplace(snapshotId)
  }

  /** Where an image leaving host `from` goes (a drain). */
  imageTarget(from: string): Promise<string> {
    return this.images.imageTarget(from)
  }

  moveImage(snapshotId: string, to: string): Promise<void> {
    return this.images.moveImage(snapshotId, to)
  }

  async storeSnapshot(): Promise<boolean> {
    throw new AppError('NOT_IMPLEMENTED', 'a fleet stores images itself (snapshot)')
  }

  async pruneSnapshots(keep: string[]): Promise<void> {
    await this.links.each('pruning snapshots', (a) => a.pruneSnapshots(keep))
  }

  async freeze(id: string): Promise<boolean> {
    return (await this.onSandbox(id)).freeze(id)
  }

  async stop(id: string): Promise<void> {
    const host = await this.hosts.hostOf(id)
    if (!host) return
    await (await this.agentOf(host)).stop(id)
    await this.hosts.unplace(id)
  }

  async usage(): Promise<SandboxUsage[]> {
    return (await this.links.each('reading usage', (a) => a.usage())).flat()
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
    for (const sizes of await this.links.each('reading pools', (a) => a.poolSizes()))
      for (const [t, n] of Object.entries(sizes)) out[t] = (out[t] ?? 0) + n
    return out
  }

  /** Running sandboxes of every host; those placed on a host that does not answer now count as live (they may well be). */
  async liveIds(): Promise<string[]> {
    const ids = new Set<string>()
    for (const row of await this.links.rows()) {
      const live = this.isFresh(row)
        ? await this.links
            .remote(row)
            .liveIds()
            .catch(() => null)
        : null
      for (const id of live ?? (await this.hosts.placedOn(row.id, 'sandbox'))) ids.add(id)
    }
    return [...ids]
  }

  onExit(listener: SandboxExitListener): void {
    this.links.onExit(listener)
  }

  close(): Promise<void> {
    return this.links.close()
  }
}
