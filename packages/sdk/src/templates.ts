// Templates: build one from an image, an image archive or a Dockerfile (with its context), follow the build's log,
// list, get and delete them. `client.templates` holds the calls; `Template` is the same, static.
import type { BuildLogEntry, Resources, TemplateBuild, TemplateListing, UserTemplate } from '@forkbox/protocol'
import { buildPath, type FollowBuildOptions, followBuildLogs } from './build-logs.ts'
import { type BuildContext, contextBody } from './context-tar.ts'
import { BUILD_LOG_TAIL_LINES, TemplateBuildError } from './errors.ts'
import { type ConnectionOptions, connectionOptions, HttpClient, pathOf, type RequestOptions } from './http.ts'
import { joinPath, localPathKind, readLocalFile, readLocalText } from './platform/index.ts'

export interface BuildTemplateOptions extends RequestOptions {
  /** The template's name; building under a name that exists makes its next version. */
  name: string
  description?: string
  /** An OCI/Docker image to take as it is (give this or `dockerfile`). */
  image?: string
  /**
   * The Dockerfile's text. When neither this nor `image` is given and `context` is a directory,
   * its `Dockerfile` is used.
   */
  dockerfile?: string
  /** What `COPY`/`ADD` read: a directory, a tar in memory, or a stream of tar bytes. */
  context?: BuildContext
  /**
   * An image as an archive instead of `image` or `dockerfile`: a path to `docker save` output or
   * to an OCI layout tarball, or those bytes (in memory or streamed).
   */
  archive?: ImageArchive
  buildArgs?: Record<string, string>
  /** Default resources of sandboxes made from it. */
  resources?: Resources
  /** A shell line started at bake time and running in every sandbox (instead of the image's CMD/ENTRYPOINT). */
  startCmd?: string
  /** A shell line that must exit 0 before the template is baked (instead of HEALTHCHECK or the exposed ports). */
  readyCmd?: string
  /** A login for the image's registry, kept (sealed) as this key's; never returned. */
  registryAuth?: { username: string; password: string }
  /** Each log line, in order, once (also across a reconnect of the log stream). */
  onLog?: (entry: BuildLogEntry) => void
}

/** A file path, or the archive's bytes in memory or as a stream. */
export type ImageArchive = string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>

export interface PruneOptions extends RequestOptions {
  /** Keep at most this much of the build layer cache; default: the host's cap. */
  layerCacheMB?: number
}

export interface PruneResult {
  /** What went, as paths in the host's templates dir. */
  removed: string[]
  freedBytes: number
}

export interface WaitForBuildOptions extends FollowBuildOptions {
  /** Each log line from `offset` on, in order, once. */
  onLog?: (entry: BuildLogEntry) => void
}

export interface LogsOptions extends FollowBuildOptions {
  /** Keep streaming new lines until the build ends (default: only the lines so far). */
  follow?: boolean
}

export interface GetBuildOptions extends RequestOptions {
  /** The log from this line on; default 0. */
  logsOffset?: number
}

export type BuildWithLogs = TemplateBuild & { logs: BuildLogEntry[] }

export class Templates {
  readonly #http: HttpClient

  /** @internal Reached through `client.templates`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  /** Templates this key can create from: the built-ins, its own (newest ready version) and public ones. */
  async list(options: RequestOptions = {}): Promise<TemplateListing[]> {
    const res = await this.#http.json<{ templates: TemplateListing[] }>({
      method: 'GET',
      path: '/v1/templates',
      signal: options.signal,
    })
    return res.templates
  }

  /** One of this key's templates (or a public one) with its builds, newest first. */
  async get(name: string, options: RequestOptions = {}): Promise<UserTemplate> {
    return this.#http.json<UserTemplate>({ method: 'GET', path: templatePath(name), signal: options.signal })
  }

  /** Deletes every version; sandboxes running from it carry on. */
  async delete(name: string, options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'DELETE', path: templatePath(name), signal: options.signal })
  }

  /**
   * Admin key only: removes what of the host's template store nothing uses (rootfs dirs and
   * snapshots of deleted or rebuilt templates, older guests, unused pulled images) and evicts
   * build layers, least recently used first, down to `layerCacheMB` (default: the host's cap).
   */
  async prune(options: PruneOptions = {}): Promise<PruneResult> {
    const json = options.layerCacheMB === undefined ? {} : { layerCacheMB: options.layerCacheMB }
    return this.#http.json<PruneResult>({ method: 'POST', path: '/v1/templates/prune', json, signal: options.signal })
  }

  /**
   * Builds a template (or the next version of one) and waits for it: resolves with the build once
   * ready (create from it with `template: build.template`, or `${build.template}@${build.version}`),
   * rejects with a `TemplateBuildError` (its code, message and last log lines) when it fails.
   * Aborting `signal` stops the waiting, not the build.
   */
  async build(options: BuildTemplateOptions): Promise<TemplateBuild> {
    const { name, description, image, buildArgs, resources, startCmd, readyCmd, registryAuth, context, signal } =
      options
    const { archive } = options
    let dockerfile = options.dockerfile
    // a context or archive that is not there fails here, before a build waits for it in vain
    if (typeof context === 'string' && (await localPathKind(context)) !== 'directory')
      throw new TypeError(`the build context ${context} is not a directory`)
    if (typeof archive === 'string' && (await localPathKind(archive)) !== 'file')
      throw new TypeError(`the image archive ${archive} is not a file`)
    if (dockerfile === undefined && image === undefined && archive === undefined && typeof context === 'string')
      dockerfile = await readLocalText(joinPath(context, 'Dockerfile'), signal)
    const { build } = await this.#http.json<{ template: UserTemplate; build: TemplateBuild }>({
      method: 'POST',
      path: '/v1/templates',
      json: {
        name,
        description,
        image,
        dockerfile,
        buildArgs,
        resources,
        startCmd,
        readyCmd,
        registryAuth,
        context: context !== undefined || undefined,
        archive: archive !== undefined || undefined,
      },
      signal,
    })
    const upload = archive ?? context
    if (upload !== undefined) {
      let unreadable: unknown
      const onError = (err: unknown) => {
        unreadable = err
      }
      const body =
        typeof archive === 'string' ? contextBody(readLocalFile(archive), onError) : contextBody(upload, onError)
      await this.#http
        .empty({
          method: 'PUT',
          path: `${buildPath(build.id)}/context`,
          body,
          contentType: 'application/x-tar',
          signal,
        })
        .catch((err: unknown) => {
          throw unreadable ?? err
        })
    }
    return this.waitForBuild(build.id, { onLog: options.onLog, signal })
  }

  /** Waits for a build to end, passing its log lines from `offset` to `onLog`; fails as `build` does. */
  async waitForBuild(buildId: string, options: WaitForBuildOptions = {}): Promise<TemplateBuild> {
    const tail: BuildLogEntry[] = []
    const lines = followBuildLogs(this.#http, buildId, options)
    for (;;) {
      const next = await lines.next()
      if (next.done) {
        if (next.value.status === 'failed') throw new TemplateBuildError(next.value, tail)
        return next.value
      }
      tail.push(next.value)
      if (tail.length > BUILD_LOG_TAIL_LINES) tail.shift()
      options.onLog?.(next.value)
    }
  }

  /** A build's status and its log from `logsOffset` on. */
  async getBuild(buildId: string, options: GetBuildOptions = {}): Promise<BuildWithLogs> {
    return this.#http.json<BuildWithLogs>({
      method: 'GET',
      path: buildPath(buildId),
      query: { logsOffset: options.logsOffset },
      signal: options.signal,
    })
  }

  /** A build's log lines from `offset`: those so far, or with `follow` every one until the build ends. */
  async *logs(buildId: string, options: LogsOptions = {}): AsyncGenerator<BuildLogEntry> {
    if (options.follow) {
      yield* followBuildLogs(this.#http, buildId, options)
      return
    }
    const build = await this.getBuild(buildId, { logsOffset: options.offset, signal: options.signal })
    yield* build.logs
  }
}

function templatePath(name: string): string {
  return pathOf('v1', 'templates', name)
}

/** `client.templates` as static calls, each taking where to connect in its options (like `Sandbox.create`). */
export class Template {
  private constructor() {}

  static build(options: BuildTemplateOptions & ConnectionOptions): Promise<TemplateBuild> {
    return templates(options).build(options)
  }

  static list(options: RequestOptions & ConnectionOptions = {}): Promise<TemplateListing[]> {
    return templates(options).list(options)
  }

  static get(name: string, options: RequestOptions & ConnectionOptions = {}): Promise<UserTemplate> {
    return templates(options).get(name, options)
  }

  static delete(name: string, options: RequestOptions & ConnectionOptions = {}): Promise<void> {
    return templates(options).delete(name, options)
  }

  static prune(options: PruneOptions & ConnectionOptions = {}): Promise<PruneResult> {
    return templates(options).prune(options)
  }

  static getBuild(buildId: string, options: GetBuildOptions & ConnectionOptions = {}): Promise<BuildWithLogs> {
    return templates(options).getBuild(buildId, options)
  }

  static logs(buildId: string, options: LogsOptions & ConnectionOptions = {}): AsyncGenerator<BuildLogEntry> {
    return templates(options).logs(buildId, options)
  }

  static waitForBuild(buildId: string, options: WaitForBuildOptions & ConnectionOptions = {}): Promise<TemplateBuild> {
    return templates(options).waitForBuild(buildId, options)
  }
}

function templates(options: ConnectionOptions): Templates {
  return new Templates(new HttpClient(connectionOptions(options)))
}
