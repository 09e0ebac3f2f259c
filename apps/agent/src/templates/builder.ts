// Executes a Dockerfile's build plan for real: every filesystem step in a build sandbox under runsc,
// each step's result a cached layer, the target stage flattened into a template rootfs dir.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync } from 'node:fs'
import { basename, join } from 'node:path'
import { AppError, type RegistryAuth, type ResolvedResources } from '@forkbox/protocol'
import type { Containers } from '../sandboxes/containers.ts'
import { type ByteBound, boundError, MIN_SCRATCH_BYTES, tighter } from './build-disk.ts'
import { type BuildLogSink, instructionText } from './build-log.ts'
import { runStep } from './build-steps.ts'
import { contextHashes, listContext } from './context-files.ts'
import { planDockerfile } from './dockerfile.ts'
import { buildKeys } from './dockerfile-keys.ts'
import type { BuildPlan, ImageConfig, ImageSource } from './dockerfile-plan.ts'
import { flatten } from './flatten.ts'
import { firstMissing, type LayerStore, tempName } from './layers.ts'
import {
  type OciImageConfig,
  type OciOptions,
  pullImage,
  readImageConfig,
  resolveImageDigest,
  unpackImage,
} from './oci.ts'

const DEFAULT_BUILD_TIMEOUT_MS = 30 * 60_000

export interface TemplateBuildInput {
  dockerfile: string
  /** The validated, unpacked build context; needed when a COPY/ADD reads from it. */
  contextDir?: string
  buildArgs?: Record<string, string>
  /** Each build sandbox's limits (the template's maxima). */
  resources: ResolvedResources
  /**
   * A user's build: its images are pulled with its key's logins and access is shown even for an
   * image the shared cache holds, and `FROM forkbox:NAME` resolves through `templates` (the key's
   * own templates and the built-ins; undefined: no such template for this key).
   */
  access?: { registryAuth: RegistryAuth; templates: (name: string) => string | undefined }
  /** Image references the build takes from the pull cache as they are (an uploaded archive), by digest. */
  localImages?: Record<string, string>
  timeoutMs?: number
  /**
   * What the build may write, bounded while it writes: each step at most `stepBytes` (the
   * template's diskMB), the whole build (steps and unpacked images) at most `buildBytes` (what the
   * key's quota leaves); `owner` is whose layers they are in the cache.
   */
  bounds?: { stepBytes?: number; buildBytes?: number; owner?: string }
  /** What RUN steps may reach: the internet (default) or nothing (a no-network key's build). */
  network?: 'internet' | 'none'
}

/** What the baker needs to make a template of the build. */
export interface TemplateBuildResult {
  /** A plain dir (hardlinks into the layers): the template's read-only rootfs. */
  rootfs: string
  /** The target stage's last layer: the same key is the same rootfs. */
  key: string
  config: ImageConfig
  startCmd: string[] | undefined
  readyCmd: string[] | null | undefined
  exposedPorts: number[]
  steps: { total: number; cached: number }
}

/** Where the rootfs of a build whose last layer is `key` is assembled. */
export function builtRootfsPath(templatesDir: string, key: string): string {
  return join(templatesDir, `built-${createHash('sha256').update(key).digest('hex').slice(0, 16)}`)
}

export interface BuilderDeps {
  templatesDir: string
  containers: Containers
  layers: LayerStore
  oci: OciOptions
  /** A forkbox template's rootfs (made ready if need be), for `FROM forkbox:<name>`. */
  templateRootfs: (name: string) => Promise<string>
  /** A CA bundle RUN steps trust beside their image's (the operator's `buildCaBundle`). */
  caBundle?: string | null
  /** Most bytes one image unpacks to on this host (FORKBOX_MAX_IMAGE_MB). */
  maxImageBytes?: number
}

/** The stages the target needs (through FROM and COPY --from), in order; others are skipped as BuildKit does. */
export function neededStages(plan: BuildPlan): number[] {
  const need = new Set<number>([plan.target])
  for (let i = plan.target; i >= 0; i--) {
    if (!need.has(i)) continue
    const stage = plan.stages[i]
    if (!stage) continue
    const uses = [stage.from, ...stage.steps.map((s) => (s.op === 'copy' ? s.from : undefined))]
    for (const u of uses) if (u?.kind === 'stage') need.add(u.index)
  }
  return [...need].sort((a, b) => a - b)
}

export class TemplateBuilder {
  constructor(private readonly deps: BuilderDeps) {}

  async build(
    input: TemplateBuildInput,
    emit: BuildLogSink = () => {},
    signal?: AbortSignal,
  ): Promise<TemplateBuildResult> {
    const deadline = Date.now() + (input.timeoutMs ?? DEFAULT_BUILD_TIMEOUT_MS)
    // planned once to find its images; again with their configs (env, workdir, user) as bases
    const firstPlan = planDockerfile(input.dockerfile, { buildArgs: input.buildArgs })
    const usesContext = firstPlan.stages.some((s) => s.steps.some((st) => st.op === 'copy' && !st.from))
    if (usesContext && !input.contextDir)
      throw new AppError('VALIDATION_FAILED', 'the Dockerfile copies from the build context, but none was given')
    const budget = new BuildBudget(input.bounds, this.deps.maxImageBytes)
    const access: Partial<OciOptions> = input.access ? { auth: input.access.registryAuth, verifyAccess: true } : {}
    const oci: OciOptions = { ...this.deps.oci, ...access, bound: budget.forImage() }
    const sources = await this.resolveSources(firstPlan, emit, oci, input.access?.templates, input.localImages)
    const plan = sources.configs.size
      ? planDockerfile(input.dockerfile, {
          buildArgs: input.buildArgs,
          baseConfig: (from) => (from.kind === 'image' ? sources.configs.get(from.ref) : undefined),
        })
      : firstPlan
    const entries = input.contextDir ? listContext(input.contextDir) : []
    const hashes = input.contextDir ? contextHashes(input.contextDir, entries, plan) : new Map<string, string>()
    const keys = buildKeys(plan, hashes, { imageDigests: sources.digests, templateVersions: sources.versions })
    const results: string[] = []
    let index = 0
    let cached = 0
    let total = 0
    // the very result assembled before: no layer is needed (the cache may have evicted them)
    const last = keys.steps[plan.target]?.at(-1)
    const assembled = last !== undefined && existsSync(builtRootfsPath(this.deps.templatesDir, last))
    for (const stageIndex of neededStages(plan)) {
      const stage = plan.stages[stageIndex]
      if (!stage) continue
      const stageKeys = keys.steps[stageIndex] ?? []
      if (assembled) {
        for (const step of stage.steps) {
          const n = index++
          total += 1
          cached += 1
          const instruction = instructionText(input.dockerfile, step.line)
          emit({ type: 'step', step: n, stage: stageIndex, line: step.line, instruction, cached: true })
          emit({ type: 'step_done', step: n, exitCode: 0, durationMs: 0 })
        }
        results[stageIndex] = stageKeys.at(-1) ?? ''
        continue
      }
      let parent = await this.rootLayer(stage.from, results, sources, emit, oci, budget)
      // once a step runs, every later one does: its key chains a parent made just now
      const reused = firstMissing(stageKeys, (k) => this.deps.layers.has(k))
      for (const k of stageKeys.slice(0, reused)) this.deps.layers.touch(k)
      for (const [i, step] of stage.steps.entries()) {
        const key = stageKeys[i]
        if (!key) throw new Error(`no key for step ${i} of stage ${stageIndex}`)
        const instruction = instructionText(input.dockerfile, step.line)
        const hit = i < reused
        const n = index++
        total += 1
        if (hit) cached += 1
        emit({ type: 'step', step: n, stage: stageIndex, line: step.line, instruction, cached: hit })
        const started = Date.now()
        if (!hit) {
          const from =
            step.op === 'copy' && step.from
              ? await this.rootLayer(step.from, results, sources, emit, oci, budget)
              : null
          const mounted = from ? await this.deps.layers.mountReadOnly(from) : null
          const what = `${instruction} (line ${step.line})`
          const bound = budget.forStep(what)
          try {
            await this.deps.layers.makeStep(
              key,
              parent,
              (mount) =>
                runStep(
                  this.deps.containers,
                  step,
                  {
                    root: mount.merged,
                    copySource: step.op === 'copy' ? (mounted?.dir ?? input.contextDir) : undefined,
                    contextPaths: entries.map((e) => e.path),
                    caBundle: this.deps.caBundle,
                  },
                  {
                    index: n,
                    line: step.line,
                    instruction,
                    resources: input.resources,
                    deadline,
                    emit,
                    signal,
                    network: input.network ?? 'internet',
                  },
                ).catch((err: unknown) => {
                  // ENOSPC inside the step: the bound's failure, named as such (with the step's output)
                  if (bound && mount.full() && !(err instanceof AppError && err.code === 'CANCELLED'))
                    throw boundError(what, bound, stepDetails(err, n, step.line, instruction))
                  throw err
                }),
              { maxBytes: bound?.maxBytes, owner: input.bounds?.owner, what },
            )
            budget.spend(this.deps.layers.bytesOf(key))
          } catch (err) {
            const exitCode =
              err instanceof AppError && typeof err.details?.exitCode === 'number' ? err.details.exitCode : -1
            emit({ type: 'step_done', step: n, exitCode, durationMs: Date.now() - started })
            throw err
          } finally {
            await mounted?.release()
          }
        }
        emit({ type: 'step_done', step: n, exitCode: 0, durationMs: Date.now() - started })
        parent = key
      }
      results[stageIndex] = parent
    }
    const key = results[plan.target]
    const target = plan.stages[plan.target]
    if (!key || !target) throw new Error('the target stage was not built')
    const rootfs = await this.assemble(key, emit)
    return {
      rootfs,
      key,
      config: target.config,
      startCmd: plan.startCmd,
      readyCmd: plan.readyCmd,
      exposedPorts: plan.exposedPorts,
      steps: { total, cached },
    }
  }

  /**
   * Pins every image the plan names to its digest (pulled, for its config) and every forkbox
   * template to its rootfs. `localImages` are already in the pull cache: no registry is asked.
   */
  private async resolveSources(
    plan: BuildPlan,
    emit: BuildLogSink,
    oci: OciOptions,
    templateNames: ((name: string) => string | undefined) | undefined,
    localImages: Record<string, string> = {},
  ) {
    const digests = new Map<string, string>()
    const configs = new Map<string, OciImageConfig>()
    const templates = new Map<string, string>()
    for (const stage of plan.stages) {
      for (const src of [stage.from, ...stage.steps.map((s) => (s.op === 'copy' ? s.from : undefined))]) {
        if (src?.kind === 'image' && !digests.has(src.ref)) {
          const local = Object.hasOwn(localImages, src.ref) ? localImages[src.ref] : undefined
          if (!local) emit({ type: 'phase', phase: 'resolve', message: src.ref })
          const digest = local ?? (await resolveImageDigest(src.ref, oci))
          digests.set(src.ref, digest)
          const { layout, pulled } = await pullImage(src.ref, digest, oci)
          if (pulled) emit({ type: 'phase', phase: 'pull', message: `${src.ref} ${digest}` })
          configs.set(src.ref, readImageConfig(layout))
        }
        if (src?.kind === 'template' && !templates.has(src.name)) {
          const name = templateNames ? templateNames(src.name) : src.name
          if (!name) throw new AppError('TEMPLATE_NOT_FOUND', `FROM forkbox:${src.name}: no template of that name`)
          templates.set(src.name, await this.deps.templateRootfs(name))
        }
      }
    }
    const versions = new Map([...templates].map(([name, dir]) => [name, basename(dir)]))
    return { digests, configs, templates, versions }
  }

  /** The layer a stage (or a COPY --from) starts from: an unpacked image, a template's rootfs, scratch, or a stage. */
  private async rootLayer(
    src: ImageSource,
    results: readonly string[],
    sources: { digests: Map<string, string>; templates: Map<string, string> },
    emit: BuildLogSink,
    oci: OciOptions,
    budget: BuildBudget,
  ): Promise<string> {
    const { layers } = this.deps
    switch (src.kind) {
      case 'stage': {
        const key = results[src.index]
        if (!key) throw new Error(`stage ${src.index} is used before it is built`)
        return key
      }
      case 'template': {
        const dir = sources.templates.get(src.name)
        if (!dir) throw new Error(`template ${src.name} not resolved`)
        const key = `template-${basename(dir)}`
        layers.addExternal(key, dir)
        return key
      }
      case 'scratch':
        await layers.makeBase('scratch', async (diff) => {
          mkdirSync(diff)
        })
        return 'scratch'
      case 'image': {
        const digest = sources.digests.get(src.ref)
        if (!digest) throw new Error(`image ${src.ref} not resolved`)
        const key = `image-${digest.replace(/^sha256:/, '')}`
        // unpacked straight into the base layer's dir: the unpack is bounded by the image bound itself
        await layers.makeBase(
          key,
          async (diff) => {
            const { layout } = await pullImage(src.ref, digest, oci)
            emit({ type: 'phase', phase: 'unpack', message: src.ref })
            await unpackImage(layout, diff, { ...oci, bound: budget.forImage() })
          },
          { owner: budget.owner, what: `unpacking ${src.ref}` },
        )
        budget.spend(layers.bytesOf(key))
        return key
      }
    }
  }

  /** The chain of `key` as one plain dir (reused when this exact result was assembled before). */
  private async assemble(key: string, emit: BuildLogSink): Promise<string> {
    const rootfs = builtRootfsPath(this.deps.templatesDir, key)
    const name = basename(rootfs)
    if (existsSync(rootfs)) return rootfs
    emit({ type: 'phase', phase: 'assemble', message: name })
    const { layers } = this.deps
    const mounted = await layers.mountReadOnly(key)
    try {
      await flatten(mounted.dir, layers.chain(key), rootfs, join(layers.root, tempName()))
    } catch (err) {
      if (!existsSync(rootfs)) throw err
    } finally {
      await mounted.release()
    }
    return rootfs
  }
}

/** What a build may still write: per step, per image, and over the whole build (the key's quota). */
class BuildBudget {
  private written = 0
  readonly owner: string | undefined

  constructor(
    private readonly bounds: TemplateBuildInput['bounds'],
    private readonly maxImageBytes: number | undefined,
  ) {
    this.owner = bounds?.owner
  }

  /** Counts a layer the build made. */
  spend(bytes: number): void {
    this.written += bytes
  }

  private quota(what: string): ByteBound | undefined {
    const total = this.bounds?.buildBytes
    if (total === undefined) return undefined
    const left = total - this.written
    if (left < MIN_SCRATCH_BYTES)
      throw boundError(what, { maxBytes: Math.max(0, left), by: 'quota' }, { writtenBytes: this.written })
    return { maxBytes: left, by: 'quota' }
  }

  /** The bound of a step: the template's disk, or what the quota leaves if that is less. */
  forStep(what: string): ByteBound | undefined {
    const disk = this.bounds?.stepBytes
    return tighter(disk === undefined ? undefined : { maxBytes: disk, by: 'disk' }, this.quota(what))
  }

  /** The bound of one image pulled or unpacked: the host's cap, or what the quota leaves. */
  forImage(): ByteBound | undefined {
    const cap = this.maxImageBytes
    return tighter(cap === undefined ? undefined : { maxBytes: cap, by: 'image' }, this.quota('the image'))
  }
}

/** A failed step's details (exit code and output tail, when the step got as far as running). */
function stepDetails(err: unknown, step: number, line: number, instruction: string): Record<string, unknown> {
  const d = err instanceof AppError ? (err.details ?? {}) : {}
  return { ...d, step, line, instruction }
}
