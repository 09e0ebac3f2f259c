// Users' template builds as this agent takes them: an uploaded context or image archive spooled to
// a file for its build, the build and bake (user-templates.ts), the built rootfs's hash recorded
// for other hosts' pulls of it; and templates built before registered again after a restart.
import { randomBytes } from 'node:crypto'
import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  type BuildLogLine,
  type RegistryAuth,
  type TemplateBuildResult,
  type TemplateBuildSpec,
  withUpload,
} from '@forkbox/protocol'
import { builtRootfsPath } from './builder.ts'
import { rootfsDigest } from './rootfs-transfer.ts'
import { buildUserTemplate, registerUserTemplate, type UserTemplateDeps } from './user-templates.ts'

export interface UserBuildsOptions extends UserTemplateDeps {
  /** Where an upload is spooled while its build runs. */
  uploadsDir: string
  /** Whether a build's result names its rootfs and hash (for the control plane's record). */
  recordRootfsDigests: boolean
}

export class UserBuilds {
  constructor(private readonly opts: UserBuildsOptions) {}

  async build(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
    upload?: AsyncIterable<Uint8Array>,
  ): Promise<TemplateBuildResult> {
    const deps = this.opts
    if (!upload) return this.withRootfsDigest(await buildUserTemplate(deps, spec, onLog, signal, registryAuth))
    const dir = this.opts.uploadsDir
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const path = join(dir, `${randomBytes(8).toString('hex')}.tar`)
    try {
      await pipeline(Readable.from(upload), createWriteStream(path, { mode: 0o600 }), { signal })
      return this.withRootfsDigest(await buildUserTemplate(deps, withUpload(spec, path), onLog, signal, registryAuth))
    } finally {
      rmSync(path, { force: true })
    }
  }

  /** A build's result with its rootfs's name and hash: the record other hosts' pulls of it are checked against. */
  private async withRootfsDigest(result: TemplateBuildResult): Promise<TemplateBuildResult> {
    const { source } = result.pinned
    if (!this.opts.recordRootfsDigests || source.kind !== 'dockerfile' || !source.built) return result
    const dir = builtRootfsPath(this.opts.templatesDir, source.built.key)
    if (!existsSync(dir)) return result
    return { ...result, rootfs: { name: basename(dir), sha256: await rootfsDigest(dir) } }
  }

  /** Makes templates built before known again (after a restart). */
  register(specs: TemplateBuildSpec[]): void {
    for (const spec of specs) registerUserTemplate(this.opts.baker, this.opts.templatesDir, spec)
  }
}
