// E2B's template builds over forkbox's TemplateService: a build is requested (name, resources), its
// files uploaded, then started with its steps — a Dockerfile and a context, built, logged, versioned
// and private like any forkbox template; its status and log read back in E2B's terms.
import { randomUUID } from 'node:crypto'
import { createReadStream, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import {
  AppError,
  type BuildLogEntry,
  CreateTemplateRequest,
  type TemplateBuild,
  TemplateName,
} from '@forkbox/protocol'
import { validationError } from '../http/errors.ts'
import type { TemplateService } from '../services/templates.ts'
import { type E2bBuildStart, registryLogin, type TemplateNameOf, translateBuild } from './template-dockerfile.ts'
import type { TemplateFiles } from './template-files.ts'

/** A requested build: kept in memory from its request until a day later (a restart forgets it). */
interface E2bBuild {
  owner: string
  name: string
  createdAt: number
  resources: { vcpus?: number; memoryMB?: number }
  /** forkbox's build, once started. */
  build: string | null
  /** Why its forkbox build never got its context (it waits for one no more). */
  lost: string | null
  starting: boolean
  /** The E2B step of each filesystem step of its Dockerfile (see Translation). */
  stepLabels: string[]
}

export interface E2bBuildRequest {
  name?: string | null
  alias?: string | null
  tags?: string[] | null
  cpuCount?: number | null
  memoryMB?: number | null
}

export interface E2bLogEntry {
  timestamp: string
  level: 'debug' | 'info' | 'warn' | 'error'
  message: string
  step?: string
}

const BUILD_TTL_MS = 24 * 3600_000
const MAX_BUILDS = 10_000
/** An upload not used for this long is removed (the clients upload again on `present: false`). */
export const FILES_TTL_MS = 3600_000
/** Lines of the log that go with a failure's reason. */
const REASON_LINES = 20

const statusOf: Record<TemplateBuild['status'], 'waiting' | 'building' | 'ready' | 'error'> = {
  waiting: 'waiting',
  queued: 'waiting',
  building: 'building',
  ready: 'ready',
  failed: 'error',
}

// the edge's services carry this adapter's builder; the edge itself never names it
declare module '../http/env.ts' {
  interface Services {
    /** E2B's template builder over `templates`. */
    e2bTemplates: E2bTemplateBuilds
  }
}

export class E2bTemplateBuilds {
  private readonly builds = new Map<string, E2bBuild>()

  constructor(
    private readonly templates: TemplateService,
    readonly files: TemplateFiles,
    /** Where a build's context is assembled before it is handed over. */
    private readonly scratchDir: string,
    /** forkbox's name for an E2B template id (`code-interpreter-v1` → `code-interpreter`). */
    private readonly templateName: TemplateNameOf,
    /** Names a user's template may not take: the E2B ids that mean a built-in. */
    private readonly reserved: ReadonlySet<string>,
  ) {}

  /** POST /v3/templates: a build id for `name` (the template's name, what `Sandbox.create` takes). */
  async request(owner: string, req: E2bBuildRequest): Promise<{ templateID: string; buildID: string }> {
    const name = req.name ?? req.alias ?? ''
    if (name.includes(':') || (req.tags?.length ?? 0) > 0)
      throw new AppError(
        'NOT_IMPLEMENTED',
        'template tags are not supported by forkbox; every build is a new version, created as name@version',
      )
    const parsed = TemplateName.safeParse(name)
    if (!parsed.success) throw validationError(parsed.error)
    const builtIn = (await this.templates.list(owner)).some((t) => t.id === null && t.name === name)
    if (builtIn || this.reserved.has(name))
      throw new AppError('VALIDATION_FAILED', `${name} is a built-in template: choose another name`)
    this.expire()
    const buildID = randomUUID()
    this.builds.set(buildID, {
      owner,
      name,
      createdAt: Date.now(),
      resources: {
        ...(req.cpuCount ? { vcpus: req.cpuCount } : {}),
        ...(req.memoryMB ? { memoryMB: req.memoryMB } : {}),
      },
      build: null,
      lost: null,
      starting: false,
      stepLabels: [],
    })
    return { templateID: name, buildID }
  }

  /** POST /v2/templates/{templateID}/builds/{buildID}: translates the steps and starts forkbox's build. */
  async start(owner: string, templateID: string, buildID: string, req: E2bBuildStart): Promise<void> {
    const b = this.get(owner, templateID, buildID)
    if (b.starting || b.build) throw new AppError('TEMPLATE_CONFLICT', `build ${buildID} was already started`)
    b.starting = true
    try {
      const login = registryLogin(req)
      const t = translateBuild(req, this.templateName)
      const base = { name: b.name, description: 'built with the E2B Template builder', resources: b.resources }
      // kept as the key's login for that registry, as PUT /v1/registries does
      if (login && req.fromImage) await this.templates.setRegistryLogin(owner, req.fromImage, login)
      if (t.kind === 'image') {
        b.build = (await this.templates.create(owner, this.createRequest({ ...base, image: t.image }))).build.id
        return
      }
      b.stepLabels = t.stepLabels
      if (t.copies.length === 0) {
        const req = this.createRequest({ ...base, dockerfile: t.dockerfile })
        b.build = (await this.templates.create(owner, req)).build.id
        return
      }
      // the context is complete before the build exists: a build never waits on a context that cannot come
      mkdirSync(this.scratchDir, { recursive: true, mode: 0o700 })
      const context = join(this.scratchDir, `${buildID}.tar`)
      try {
        await this.files.context(owner, t.copies, context)
        const req = this.createRequest({ ...base, dockerfile: t.dockerfile, context: true })
        const { build } = await this.templates.create(owner, req)
        b.build = build.id
        try {
          await this.templates.uploadContext(owner, build.id, createReadStream(context))
        } catch (err) {
          // the build would wait for its context forever: its status says it failed
          b.lost = err instanceof Error ? err.message : String(err)
          throw err
        }
      } finally {
        rmSync(context, { force: true })
      }
    } finally {
      b.starting = false
    }
  }

  private createRequest(req: Record<string, unknown>): CreateTemplateRequest {
    const parsed = CreateTemplateRequest.safeParse(req)
    if (!parsed.success) throw validationError(parsed.error)
    return parsed.data
  }

  /** GET /templates/{templateID}/builds/{buildID}/status: E2B's status, log from `offset`, and a failure's reason. */
  async status(owner: string, templateID: string, buildID: string, offset: number) {
    const b = this.get(owner, templateID, buildID)
    const head = { templateID: b.name, buildID, logs: [] as string[] }
    if (!b.build) return { ...head, status: 'waiting' as const, logEntries: [] }
    const build = await this.templates.getBuild({ keyId: owner }, b.build)
    const logEntries = (await this.templates.logs({ keyId: owner }, b.build, offset)).map((e) => this.entry(b, e))
    const status = b.lost ? 'error' : statusOf[build.status]
    if (status !== 'error') return { ...head, status, logEntries }
    const all = await this.templates.logs({ keyId: owner }, b.build, 0)
    const step = [...all].reverse().find((e) => e.step !== null)
    return {
      ...head,
      status,
      logEntries,
      reason: {
        message: build.error?.message ?? b.lost ?? 'the build failed',
        ...(step ? { step: this.label(b, step) } : {}),
        logEntries: all.slice(-REASON_LINES).map((e) => this.entry(b, e)),
      },
    }
  }

  /** GET /templates/aliases/{alias}: whether the caller has (or sees) a template of that name. */
  async alias(owner: string, name: string): Promise<{ templateID: string; public: boolean }> {
    const t = await this.templates.get({ keyId: owner }, name)
    return { templateID: t.name, public: t.public }
  }

  /** Forgets requests a day old, and the uploads nothing used for an hour. */
  sweep(): void {
    this.expire()
    this.files.sweep(FILES_TTL_MS)
  }

  private expire(): void {
    const before = Date.now() - BUILD_TTL_MS
    for (const [id, b] of this.builds) if (b.createdAt < before) this.builds.delete(id)
    // oldest first: a Map iterates in insertion order
    for (const id of this.builds.keys()) {
      if (this.builds.size < MAX_BUILDS) break
      this.builds.delete(id)
    }
  }

  private get(owner: string, templateID: string, buildID: string): E2bBuild {
    const b = this.builds.get(buildID)
    // another key's build is answered as one that does not exist
    if (!b || b.owner !== owner || b.name !== templateID)
      throw new AppError('NOT_FOUND', `no build ${buildID} of template ${templateID}`)
    return b
  }

  private label(b: E2bBuild, e: BuildLogEntry): string | undefined {
    return e.step === null ? undefined : b.stepLabels[e.step - 1]
  }

  private entry(b: E2bBuild, e: BuildLogEntry): E2bLogEntry {
    const step = this.label(b, e)
    const failed = e.stream === 'system' && e.message.startsWith('failed: ')
    return { timestamp: e.at, level: failed ? 'error' : 'info', message: e.message, ...(step ? { step } : {}) }
  }
}
