// Templates users build through the API: an image's rootfs, or a Dockerfile built in build
// sandboxes; either way baked at once. The server keeps who owns them and registers them again
// after a restart (their pinned spec then needs no registry and no rebuild).
import { execFile } from 'node:child_process'
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import {
  AppError,
  type BuildLogLine,
  type BuiltImage,
  type RegistryAuth,
  type TemplateBuildResult,
  type TemplateBuildSpec,
  type TemplateProgress,
} from '@forkbox/protocol'
import type { DockerfileBuilder, TemplateBaker } from './baker.ts'
import { quotaBound, tighter } from './build-disk.ts'
import { eventLine } from './build-log.ts'
import { builtRootfsPath, type TemplateBuildInput } from './builder.ts'
import { builtDefinition, builtImage } from './built-image.ts'
import { validateContextTar } from './context-tar.ts'
import { TemplateDefinition } from './definition.ts'
import { formatImageReference, parseImageReference } from './image-ref.ts'
import { importArchive, type OciOptions } from './oci.ts'

const run = promisify(execFile)

/** Largest unpacked context the agent takes (the server caps the upload before). */
const MAX_CONTEXT_BYTES = 4 * 1024 * 1024 * 1024

export interface UserTemplateDeps {
  baker: TemplateBaker
  templatesDir: string
  dockerfiles: DockerfileBuilder
  oci: OciOptions
}

/** What an uploaded archive's image is called in the Dockerfile its build becomes (never asked of a registry). */
const ARCHIVE_IMAGE = 'forkbox-archive'

/** The build request's start and ready commands (shell lines) over the image's. */
function withCommands(def: TemplateDefinition, spec: TemplateBuildSpec): TemplateDefinition {
  const shell = (line: string) => ['/bin/sh', '-c', line]
  return {
    ...def,
    ...(spec.startCmd ? { startCmd: shell(spec.startCmd) } : {}),
    ...(spec.readyCmd ? { readyCmd: shell(spec.readyCmd) } : {}),
  }
}

function imageDefinition(spec: TemplateBuildSpec & { source: { kind: 'image' } }): TemplateDefinition {
  // the reference is checked before anything is pulled: a bad one is the user's error
  parseImageReference(spec.source.image)
  const def = TemplateDefinition.parse({
    name: spec.name,
    description: spec.description,
    image: spec.source.image,
    resources: spec.resources,
    imageDirs: true,
    limitAddressSpace: false,
  })
  return withCommands(def, spec)
}

/** Makes a template built before known to the baker again (after a restart). */
export function registerUserTemplate(baker: TemplateBaker, templatesDir: string, spec: TemplateBuildSpec): void {
  const { source } = spec
  if (source.kind === 'image') {
    baker.register(imageDefinition({ ...spec, source }))
    return
  }
  if (source.kind !== 'dockerfile' || !source.built)
    throw new AppError('INTERNAL', `template ${spec.name} was never built`)
  const def = withCommands(builtDefinition(spec.name, spec.description, source.built, spec.resources), spec)
  baker.registerBuilt(def, builtRootfsPath(templatesDir, source.built.key))
}

function progressLine(p: TemplateProgress): BuildLogLine {
  const pct = p.fraction === undefined ? '' : ` ${Math.round(p.fraction * 100)}%`
  return { stream: 'system', message: `${p.phase}${pct}${p.message ? `: ${p.message}` : ''}` }
}

/** Unpacks an uploaded context (checked entry by entry first: nothing in it reaches outside its root). */
async function unpackContext(tar: string, into: string): Promise<void> {
  await validateContextTar(createReadStream(tar), { maxBytes: MAX_CONTEXT_BYTES })
  mkdirSync(into, { recursive: true })
  try {
    await run('tar', ['-x', '-f', tar, '-C', into, '--no-same-owner', '--no-overwrite-dir'], {
      maxBuffer: 1024 * 1024,
    })
  } catch (err) {
    throw new AppError('VALIDATION_FAILED', `the build context is not a tar archive tar can read: ${String(err)}`)
  }
}

async function buildFromDockerfile(
  deps: UserTemplateDeps,
  spec: TemplateBuildSpec & { source: { kind: 'dockerfile' } },
  onLog: (line: BuildLogLine) => void,
  signal: AbortSignal | undefined,
  registryAuth: RegistryAuth,
  localImages: Record<string, string> = {},
): Promise<BuiltImage> {
  const own = spec.source.templates ?? {}
  // a user's FROM forkbox:NAME reaches its key's templates and the built-ins, never another key's
  const templates = (name: string) =>
    Object.hasOwn(own, name) ? own[name] : deps.baker.isBuiltIn(name) ? name : undefined
  const scratch = mkdtempSync(join(deps.templatesDir, '.context-'))
  try {
    let contextDir: string | undefined
    if (spec.source.contextTar) {
      onLog({ stream: 'system', message: 'unpacking the build context' })
      contextDir = join(scratch, 'context')
      await unpackContext(spec.source.contextTar, contextDir)
    }
    const built = await deps.dockerfiles.buildDockerfile(
      {
        dockerfile: spec.source.dockerfile,
        contextDir,
        buildArgs: spec.source.buildArgs,
        resources: spec.resources.maxima,
        access: { registryAuth, templates },
        localImages,
        bounds: buildBounds(spec),
        network: spec.buildNetwork ?? 'internet',
      },
      (e) => onLog(eventLine(e)),
      signal,
    )
    onLog({
      stream: 'system',
      message: `built: ${built.steps.total} steps, ${built.steps.cached} from the layer cache`,
    })
    return builtImage(built)
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/** A build's bounds: each step the template's diskMB, the whole build what the key's quota leaves. */
export function buildBounds(spec: TemplateBuildSpec): NonNullable<TemplateBuildInput['bounds']> {
  const { limits } = spec
  return {
    stepBytes: spec.resources.defaults.diskMB * 1024 * 1024,
    ...(limits?.maxBytes !== undefined ? { buildBytes: limits.maxBytes } : {}),
    ...(limits?.owner ? { owner: limits.owner } : {}),
  }
}

export async function buildUserTemplate(
  deps: UserTemplateDeps,
  withLimits: TemplateBuildSpec,
  onLog: (line: BuildLogLine) => void,
  signal?: AbortSignal,
  registryAuth: RegistryAuth = {},
): Promise<TemplateBuildResult> {
  const { baker } = deps
  // this run's limits are never part of what is pinned (a later registration has none)
  const { limits, ...spec } = withLimits
  const { source } = spec
  let pinned: TemplateBuildSpec
  if (source.kind === 'image') {
    baker.register(imageDefinition({ ...spec, source }))
    pinned = spec
  } else {
    // an archive's image is taken into the pull cache, then built as `FROM` it: the same layers,
    // image config and pinning as any Dockerfile's
    let localImages: Record<string, string> = {}
    let dockerfile: TemplateBuildSpec & { source: { kind: 'dockerfile' } }
    if (source.kind === 'archive') {
      if (!source.archiveTar) throw new AppError('VALIDATION_FAILED', 'no image archive was uploaded')
      onLog({ stream: 'system', message: 'importing the image archive' })
      const bound = tighter(deps.oci.bound, quotaBound(limits?.maxBytes))
      const digest = await importArchive(source.archiveTar, { ...deps.oci, bound })
      onLog({ stream: 'system', message: `image ${digest}` })
      localImages = { [ARCHIVE_IMAGE]: digest }
      dockerfile = { ...spec, source: { kind: 'dockerfile', dockerfile: `FROM ${ARCHIVE_IMAGE}\n`, buildArgs: {} } }
    } else dockerfile = { ...spec, source }
    const { dockerfile: text, buildArgs } = dockerfile.source
    const built = await buildFromDockerfile(deps, { ...dockerfile, limits }, onLog, signal, registryAuth, localImages)
    pinned = { ...spec, source: { kind: 'dockerfile', dockerfile: text, buildArgs, built } }
    registerUserTemplate(baker, deps.templatesDir, pinned)
  }
  signal?.throwIfAborted()
  try {
    let last = ''
    await baker.build(
      spec.name,
      (p) => {
        const line = progressLine(p)
        // pulls and bakes report often: the log keeps each distinct line once
        if (line.message === last) return
        last = line.message
        onLog(line)
      },
      registryAuth,
      limits?.maxBytes,
    )
  } catch (err) {
    await baker.remove(spec.name)
    throw err
  }
  const sizeBytes = await baker.sizeOf(spec.name)
  const digest = baker.digestOf(spec.name)
  if (source.kind === 'image' && digest) {
    const image = formatImageReference(parseImageReference(source.image), digest)
    return { pinned: { ...spec, source: { kind: 'image', image } }, sizeBytes }
  }
  return { pinned, sizeBytes }
}
