// Templates users build, the catalogue: names per key, versions and what is published, who may read
// which build, and the resolution of a create's `template` (a name, `name@version`, or a built-in)
// to what the agent knows it by. Builds run in build-queue.ts; their logs are build-logs.ts.
import { randomBytes } from 'node:crypto'
import { createWriteStream, linkSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  type AgentApi,
  AppError,
  type BuildLogEntry,
  type CreateTemplateRequest,
  type KeyScopes,
  type PruneOptions,
  type ResolvedResources,
  type TemplateBuild,
  type TemplateBuildSpec,
  type TemplateInfo,
  type TemplateListing,
  type TemplatePruneResult,
  type UserTemplate,
} from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { RegistryCredentialStore } from '../store/registry-credentials.ts'
import { agentName, type BuildRecord, type TemplateRecord, type TemplateStore } from '../store/templates.ts'
import { BuildLogs } from './build-logs.ts'
import { BuildQueue, type BuildQueueLimits } from './build-queue.ts'
import { agentTemplateInfo, recordedTemplateInfo, type TemplateResolver } from './template-resolver.ts'
import { buildNetworkOf, checkBuildScopes, inTemplateScope } from './template-scopes.ts'

export interface TemplateLimits extends BuildQueueLimits {
  /** Largest build context upload. */
  maxContextBytes: number
  /** Where uploaded contexts wait for their build. */
  contextsDir: string
  /** The built-in template whose maxima bound every user template's resources. */
  ceilingTemplate: string
  /** Refuses a build its key may not start now (its quota of concurrent builds, or of template bytes). */
  admitBuild?: (owner: string) => Promise<void>
  /** The key's scopes as they are now (unset: none, everything a key may). */
  scopesOf?: (owner: string) => Promise<KeyScopes>
}

/** Who reads a template or build: its owner sees all of it, the admin key too, other keys only what was published. */
export interface TemplateReader {
  keyId: string
  admin?: boolean
}

/** How long a build waits for its context upload. */
const CONTEXT_WAIT_MS = 60 * 60_000

const publicBuild = ({ spec: _spec, ...b }: BuildRecord): TemplateBuild => b

/** The registry an image reference pulls from, as Docker reads it (no host part: Docker Hub). */
export function registryOf(image: string): string {
  const first = image.split('/')[0] ?? ''
  const isHost = image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost')
  return isHost ? first : 'docker.io'
}

/** What still starts from a template (its agent name): running or hibernated sandboxes, snapshots. */
export interface TemplatesInUse {
  templatesInUse(): Promise<Set<string>>
}

export interface TemplateServiceOptions {
  store: TemplateStore
  agent: AgentApi
  log: Logger
  limits: TemplateLimits
  /** Templates still in use are kept with the agent when deleted (none: nothing is). */
  inUse?: TemplatesInUse
  /** Each key's registry logins, passed to its builds' pulls. */
  registries?: RegistryCredentialStore
}

export class TemplateService implements TemplateResolver {
  /** Build logs, kept and followed live. */
  private readonly logBook: BuildLogs
  /** Builds queued and running on the agent. */
  private readonly builds: BuildQueue

  private readonly store: TemplateStore
  private readonly agent: AgentApi
  readonly log: Logger
  private readonly limits: TemplateLimits
  private readonly inUse: TemplatesInUse | null
  private readonly registries?: RegistryCredentialStore

  constructor(o: TemplateServiceOptions) {
    const { store, agent, log, limits, registries } = o
    this.store = store
    this.agent = agent
    this.log = log
    this.limits = limits
    this.inUse = o.inUse ?? null
    this.registries = registries
    this.logBook = new BuildLogs(store, log)
    this.builds = new BuildQueue({ store, agent, log, limits, registries, logs: this.logBook })
  }

  /**
   * After a restart: unfinished builds failed with a reason (unless other replicas may be running
   * them: `shared`), ready ones made known to the agent again.
   */
  async recover(opts: { shared?: boolean } = {}): Promise<void> {
    if (!opts.shared)
      for (const id of await this.store.unfinished())
        await this.store.transition(id, ['waiting', 'queued', 'building'], 'failed', {
          error: { code: 'INTERNAL', message: 'the control plane restarted during the build' },
        })
    rmSync(this.limits.contextsDir, { recursive: true, force: true })
    await this.agent.registerTemplates(await this.readySpecs())
    await this.collect()
  }

  /** The specs of every ready user template version: what a host must know to start sandboxes of them. */
  async readySpecs(): Promise<TemplateBuildSpec[]> {
    return (await this.store.readySpecs()).map((b) => b.spec)
  }

  /**
   * Removes the artifacts of deleted templates' versions nothing starts from any more (a running
   * or hibernated sandbox, or a snapshot, needs its version's rootfs). Run after deletes, at start
   * and now and then.
   */
  async collect(): Promise<void> {
    // a build whose context never came (the client went away) does not wait for ever
    for (const id of await this.store.waitingSince(new Date(Date.now() - CONTEXT_WAIT_MS).toISOString()))
      await this.store.transition(id, ['waiting'], 'failed', {
        error: { code: 'CANCELLED', message: `no context was uploaded within ${CONTEXT_WAIT_MS / 60_000} minutes` },
      })
    const used = (await this.inUse?.templatesInUse()) ?? new Set<string>()
    for (const b of await this.store.readySpecs()) {
      if (!b.deleted || used.has(b.spec.name)) continue
      await this.agent.removeTemplate(b.spec.name)
      await this.store.markRemoved(b.id)
    }
  }

  private async ownTemplate(owner: string, name: string): Promise<TemplateRecord> {
    const t = await this.store.byName(owner, name)
    if (!t) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${name}`)
    return t
  }

  /**
   * A build its owner (or the admin key) may read. Not other keys, even of a public template: a
   * build's log holds whatever its steps echoed (build args, tokens), and its versions were never
   * approved.
   */
  private async ownBuild(who: TemplateReader, id: string): Promise<BuildRecord> {
    const b = await this.store.getBuild(id)
    const t = b && (await this.store.get(b.templateId))
    if (!b || !t || (t.owner !== who.keyId && !who.admin)) throw new AppError('NOT_FOUND', `no build ${id}`)
    return b
  }

  /**
   * The ready build `owner` gets of `t`: the owner its newest (or `version`); every other key only
   * the one the admin published, whatever the owner built since.
   */
  private async buildFor(owner: string, t: TemplateRecord, version?: number): Promise<BuildRecord | null> {
    if (t.owner === owner) return this.store.readyBuild(t, version)
    const b = t.publishedBuild ? await this.store.getBuild(t.publishedBuild) : null
    if (!b || b.templateId !== t.id || b.status !== 'ready') return null
    return version === undefined || version === b.version ? b : null
  }

  private async builtIns(): Promise<TemplateInfo[]> {
    const all = await this.agent.templates()
    const users = await Promise.all(all.map((t) => this.store.isAgentName(t.name)))
    return all.filter((_, i) => !users[i])
  }

  /**
   * The template a create names, as the agent knows it: the caller's own template (newest ready
   * version, or `name@version`), else a public one (its published version only), else a built-in.
   * A user's built image is known from its record; the agent is asked only for what it alone knows.
   */
  async resolve(owner: string, ref: string): Promise<TemplateInfo> {
    const at = ref.lastIndexOf('@')
    const name = at > 0 ? ref.slice(0, at) : ref
    const version = at > 0 ? Number(ref.slice(at + 1)) : undefined
    if (version !== undefined && !(Number.isInteger(version) && version > 0))
      throw new AppError('VALIDATION_FAILED', `${ref}: a version is a positive integer (name@3)`)
    const t = (await this.store.byName(owner, name)) ?? (await this.store.publicByName(name))
    if (t) {
      const b = await this.buildFor(owner, t, version)
      if (!b)
        throw new AppError(
          'TEMPLATE_NOT_FOUND',
          version === undefined
            ? `template ${name} has no ready build yet`
            : `template ${name} has no ready version ${version}`,
        )
      return recordedTemplateInfo(b.spec) ?? agentTemplateInfo(this.agent, b.spec.name)
    }
    if (version === undefined && !(await this.store.isAgentName(name))) return agentTemplateInfo(this.agent, name)
    throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${ref}`)
  }

  /** What a sandbox's template is shown as: `name@version` for a user's, the name for a built-in. */
  async label(agentName: string): Promise<string> {
    return (await this.store.labelOf(agentName)) ?? agentName
  }

  async list(owner: string): Promise<TemplateListing[]> {
    const agentInfo = new Map((await this.agent.templates()).map((t) => [t.name, t]))
    const builtIn = (await this.builtIns()).map((t) => ({ ...t, id: null, version: null, public: true }))
    const users: TemplateListing[] = []
    for (const t of await this.store.visible(owner)) {
      const b = await this.buildFor(owner, t)
      const info = b && agentInfo.get(b.spec.name)
      if (!b || !info) continue
      users.push({ ...info, name: t.name, description: t.description, id: t.id, version: b.version, public: t.public })
    }
    return [...builtIn, ...users]
  }

  /**
   * The templates `FROM forkbox:NAME` may name in this key's builds: its own at their newest ready
   * version, public ones at their published version; only those its `templates` scope lists.
   */
  private async ownTemplates(owner: string, scope: readonly string[] | undefined): Promise<Record<string, string>> {
    const out: Record<string, string> = {}
    for (const t of await this.store.visible(owner)) {
      if (scope && !inTemplateScope(scope, t.name)) continue
      const b = await this.buildFor(owner, t)
      // its own name wins over a public one of the same name
      if (b && (t.owner === owner || !(t.name in out))) out[t.name] = b.spec.name
    }
    return out
  }

  async get(who: TemplateReader, name: string): Promise<UserTemplate> {
    const t = (await this.store.byName(who.keyId, name)) ?? (await this.store.publicByName(name))
    if (!t) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${name}`)
    return this.view(t, who)
  }

  /** The template as `who` sees it: its builds for the owner and the admin key only. */
  private async view(t: TemplateRecord, who: TemplateReader): Promise<UserTemplate> {
    const published = t.publishedBuild ? await this.store.getBuild(t.publishedBuild) : null
    return {
      id: t.id,
      name: t.name,
      description: t.description,
      public: t.public,
      version: (await this.buildFor(who.keyId, t))?.version ?? null,
      publishedVersion: published?.version ?? null,
      createdAt: t.createdAt,
      builds: t.owner === who.keyId || who.admin ? (await this.store.builds(t)).map(publicBuild) : [],
    }
  }

  /** Starts a build of `req.name` (a new template, or its next version); it waits for its context if one is to come. */
  async create(owner: string, req: CreateTemplateRequest): Promise<{ template: UserTemplate; build: TemplateBuild }> {
    const scopes = (await this.limits.scopesOf?.(owner)) ?? {}
    checkBuildScopes(scopes, req)
    await this.limits.admitBuild?.(owner)
    const builtIn = await this.builtIns()
    if (builtIn.some((t) => t.name === req.name))
      throw new AppError('VALIDATION_FAILED', `${req.name} is a built-in template: choose another name`)
    const ceiling = builtIn.find((t) => t.name === this.limits.ceilingTemplate)
    if (!ceiling) throw new AppError('INTERNAL', `the ${this.limits.ceilingTemplate} template is missing`)
    const defaults: ResolvedResources = { ...ceiling.defaults, ...req.resources }
    for (const k of ['vcpus', 'memoryMB', 'diskMB', 'pids'] as const)
      if (defaults[k] > ceiling.maxima[k])
        throw new AppError(
          'RESOURCE_LIMIT_EXCEEDED',
          `${k} ${defaults[k]} is above this host's maximum ${ceiling.maxima[k]}`,
          {
            resource: k,
            maximum: ceiling.maxima[k],
          },
        )
    const t =
      (await this.store.byName(owner, req.name)) ??
      (await this.store.insertTemplate({
        id: `tpl-${randomBytes(6).toString('hex')}`,
        owner,
        name: req.name,
        description: req.description ?? '',
      }))
    if (req.registryAuth) {
      if (!req.image)
        throw new AppError('VALIDATION_FAILED', 'registryAuth goes with an image (or set logins at /v1/registries)')
      await this.setRegistryLogin(owner, req.image, req.registryAuth)
    }
    const source: TemplateBuildSpec['source'] = req.image
      ? { kind: 'image', image: req.image }
      : req.archive
        ? { kind: 'archive' }
        : {
            kind: 'dockerfile',
            dockerfile: req.dockerfile ?? '',
            buildArgs: req.buildArgs ?? {},
            templates: await this.ownTemplates(owner, scopes.templates),
          }
    const build = await this.store.insertBuild(
      t,
      `bld-${randomBytes(10).toString('hex')}`,
      req.context || req.archive ? 'waiting' : 'queued',
      (v) => ({
        name: agentName(t.id, v),
        description: req.description ?? t.description,
        source,
        resources: { defaults, maxima: ceiling.maxima },
        ...(req.startCmd ? { startCmd: req.startCmd } : {}),
        ...(req.readyCmd ? { readyCmd: req.readyCmd } : {}),
        ...buildNetworkOf(scopes),
      }),
    )
    if (build.status === 'queued') this.builds.enqueue(build.id)
    return { template: await this.view(t, { keyId: owner }), build: publicBuild(build) }
  }

  /** Keeps `login` (sealed) as the key's for the registry `image` pulls from. */
  async setRegistryLogin(owner: string, image: string, login: { username: string; password: string }): Promise<void> {
    if (!this.registries) throw new AppError('NOT_IMPLEMENTED', 'this server keeps no registry logins')
    await this.registries.put(owner, registryOf(image), login.username, login.password)
  }

  /** Takes a waiting build's context tarball or image archive (capped), then queues the build. */
  async uploadContext(owner: string, buildId: string, body: Readable): Promise<TemplateBuild> {
    // its owner's alone (not the admin's either): the context is what gets built
    const b = await this.ownBuild({ keyId: owner }, buildId)
    const { source } = b.spec
    if (b.status !== 'waiting' || source.kind === 'image')
      throw new AppError('TEMPLATE_CONFLICT', `build ${buildId} is ${b.status}: it takes no context`)
    mkdirSync(this.limits.contextsDir, { recursive: true, mode: 0o700 })
    const path = join(this.limits.contextsDir, `${buildId}.tar`)
    // a name of its own per upload: a refused one (over the cap) may answer before its file is gone
    const part = `${path}.${randomBytes(6).toString('hex')}.part`
    try {
      await pipeline(body, createWriteStream(part, { flags: 'wx', mode: 0o600 }))
      // a link, not a rename: a context another upload already put there is never replaced
      linkSync(part, path)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST')
        throw new AppError('TEMPLATE_CONFLICT', `build ${buildId} already has its context`)
      throw err
    } finally {
      rmSync(part, { force: true })
    }
    const spec: TemplateBuildSpec = {
      ...b.spec,
      source: source.kind === 'archive' ? { ...source, archiveTar: path } : { ...source, contextTar: path },
    }
    if (!(await this.store.transition(buildId, ['waiting'], 'queued', { spec }))) {
      rmSync(path, { force: true })
      throw new AppError('TEMPLATE_CONFLICT', `build ${buildId} is no longer waiting for its context`)
    }
    this.builds.enqueue(buildId)
    return publicBuild((await this.store.getBuild(buildId)) as BuildRecord)
  }

  async getBuild(who: TemplateReader, id: string): Promise<TemplateBuild> {
    return publicBuild(await this.ownBuild(who, id))
  }

  async logs(who: TemplateReader, id: string, from = 0): Promise<BuildLogEntry[]> {
    await this.ownBuild(who, id)
    return this.store.logs(id, from)
  }

  /** Deletes the template: its builds stop, its versions go (sandboxes running from them carry on). */
  async delete(owner: string, name: string): Promise<void> {
    const t = await this.ownTemplate(owner, name)
    await this.store.markDeleted(t.id)
    for (const b of await this.store.builds(t)) {
      this.builds.cancel(b.id)
      await this.store.transition(b.id, ['waiting', 'queued', 'building'], 'failed', {
        error: { code: 'CANCELLED', message: 'the template was deleted' },
      })
    }
    await this.collect()
  }

  /**
   * The admin key's switch: publishing approves one ready build (`version`, else the newest ready
   * now), which every key can then list and create from; the owner's later builds stay its own
   * until the admin publishes again. Unpublishing makes the template private.
   */
  async setPublic(admin: TemplateReader, id: string, value: boolean, version?: number): Promise<UserTemplate> {
    const t = await this.store.get(id)
    if (!t) throw new AppError('TEMPLATE_NOT_FOUND', `no template ${id}`)
    if (!value) {
      await this.store.setPublished(t.id, null)
      return this.view({ ...t, public: false, publishedBuild: null }, admin)
    }
    const other = await this.store.publicByName(t.name)
    if (other && other.id !== t.id)
      throw new AppError('TEMPLATE_CONFLICT', `another public template is named ${t.name}`)
    const b = await this.store.readyBuild(t, version)
    if (!b)
      throw version === undefined
        ? new AppError('TEMPLATE_CONFLICT', `template ${t.name} has no ready build to publish yet`)
        : new AppError('TEMPLATE_NOT_FOUND', `template ${t.name} has no ready version ${version}`)
    await this.store.setPublished(t.id, b.id)
    return this.view({ ...t, public: true, publishedBuild: b.id }, admin)
  }

  /**
   * The build's log from `from` on, then every line as it comes until the build ends (or `signal`
   * aborts); resolves with the build as it ended.
   */
  async follow(
    who: TemplateReader,
    id: string,
    from: number,
    onEntry: (e: BuildLogEntry) => Promise<void>,
    signal: AbortSignal,
  ): Promise<TemplateBuild> {
    await this.ownBuild(who, id)
    return publicBuild(await this.logBook.follow(id, from, onEntry, signal))
  }

  /** Removes what of the agent's template store nothing uses (see AgentApi.pruneTemplates). */
  prune(opts: PruneOptions): Promise<TemplatePruneResult> {
    return this.agent.pruneTemplates(opts)
  }

  /** Stops accepting builds and waits for those running to end (they are aborted). */
  drain(): Promise<void> {
    return this.builds.drain()
  }

  /** Replicas sharing a store: builds of a replica that went away are failed (see BuildQueue). */
  failLapsed(): Promise<void> {
    return this.builds.failLapsed()
  }
}
