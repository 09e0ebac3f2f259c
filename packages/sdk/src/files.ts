// `sandbox.files`: the filesystem routes under /v1/sandboxes/{id}/files.
import type { FileEntry } from '@forkbox/protocol'
import { toBytes, toText } from './encoding.ts'
import { ConflictError, NotFoundError } from './errors.ts'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'
import { type FileChange, type WatchHandle, type WatchOptions, watchDir } from './watch.ts'

export interface FileOptions extends RequestOptions {
  /** The sandbox user to act as; the server's default is `user`. */
  user?: string
}

export interface ReadFileOptions extends FileOptions {
  /** `text` (default) decodes UTF-8; `bytes` returns the raw content. */
  format?: 'text' | 'bytes'
}

export interface WriteFileOptions extends FileOptions {
  /** Permission bits, e.g. `0o755`. */
  mode?: number
  /**
   * User metadata kept with the file, replacing what it had (keys: letters, digits and
   * `!#$%&'*+-.^_\`|~`; values: printable ASCII; at most 64). `stat` returns it.
   */
  metadata?: Record<string, string>
}

export interface ListFilesOptions extends FileOptions {
  /** How many directory levels to descend; the server's default is 1. */
  depth?: number
  /** Each entry's user metadata too. */
  metadata?: boolean
}

export interface RemoveFileOptions extends FileOptions {
  /** Remove directories with their contents; the server's default is true. */
  recursive?: boolean
}

export interface FileUrlOptions extends FileOptions {
  /** How long the URL works; the server's default is 3600 (1 hour), at most 7 days. */
  expiresInSeconds?: number
}

export class Files {
  readonly #http: HttpClient
  readonly #base: string

  /** @internal Reached through `sandbox.files`. */
  constructor(http: HttpClient, sandboxId: string) {
    this.#http = http
    this.#base = `${pathOf('v1', 'sandboxes', sandboxId)}/files`
  }

  read(path: string, options: ReadFileOptions & { format: 'bytes' }): Promise<Uint8Array>
  read(path: string, options?: ReadFileOptions & { format?: 'text' }): Promise<string>
  async read(path: string, options: ReadFileOptions = {}): Promise<string | Uint8Array> {
    const bytes = await this.#http.bytes({
      method: 'GET',
      path: this.#base,
      query: { path, user: options.user },
      signal: options.signal,
    })
    return options.format === 'bytes' ? bytes : toText(bytes)
  }

  /** Writes the whole file as the raw request body; parent directories are created. */
  async write(path: string, data: string | Uint8Array, options: WriteFileOptions = {}): Promise<FileEntry> {
    return this.#http.json<FileEntry>({
      method: 'PUT',
      path: this.#base,
      query: { path, mode: options.mode, user: options.user },
      headers: Object.fromEntries(Object.entries(options.metadata ?? {}).map(([k, v]) => [`x-metadata-${k}`, v])),
      body: toBytes(data),
      signal: options.signal,
    })
  }

  async list(path: string, options: ListFilesOptions = {}): Promise<FileEntry[]> {
    const res = await this.#http.json<{ entries: FileEntry[] }>({
      method: 'GET',
      path: `${this.#base}/list`,
      query: { path, depth: options.depth, user: options.user, metadata: options.metadata },
      signal: options.signal,
    })
    return res.entries
  }

  async stat(path: string, options: FileOptions = {}): Promise<FileEntry> {
    return this.#http.json<FileEntry>({
      method: 'GET',
      path: `${this.#base}/stat`,
      query: { path, user: options.user },
      signal: options.signal,
    })
  }

  /** False when nothing is at `path`; other failures (sandbox gone, ...) still throw. */
  async exists(path: string, options: FileOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, options)
      return true
    } catch (err) {
      if (err instanceof NotFoundError && err.code === 'FILE_NOT_FOUND') return false
      if (err instanceof ConflictError && err.code === 'NOT_A_DIRECTORY') return false
      throw err
    }
  }

  async makeDir(path: string, options: FileOptions = {}): Promise<FileEntry> {
    return this.#http.json<FileEntry>({
      method: 'POST',
      path: `${this.#base}/mkdir`,
      json: { path, user: options.user },
      signal: options.signal,
    })
  }

  async remove(path: string, options: RemoveFileOptions = {}): Promise<void> {
    await this.#http.empty({
      method: 'DELETE',
      path: this.#base,
      query: { path, recursive: options.recursive, user: options.user },
      signal: options.signal,
    })
  }

  async rename(from: string, to: string, options: FileOptions = {}): Promise<FileEntry> {
    return this.#http.json<FileEntry>({
      method: 'POST',
      path: `${this.#base}/rename`,
      json: { from, to, user: options.user },
      signal: options.signal,
    })
  }

  /**
   * A URL that downloads the file (plain GET) with no key, until it expires: for a browser, or a
   * service that must not hold the key. Valid for this sandbox, path and user only.
   */
  downloadUrl(path: string, options: FileUrlOptions = {}): Promise<string> {
    return this.#signedUrl(path, 'read', options)
  }

  /** A URL that writes the file (PUT of the raw bytes) with no key, until it expires. */
  uploadUrl(path: string, options: FileUrlOptions = {}): Promise<string> {
    return this.#signedUrl(path, 'write', options)
  }

  async #signedUrl(path: string, operation: 'read' | 'write', options: FileUrlOptions): Promise<string> {
    const res = await this.#http.json<{ path: string }>({
      method: 'POST',
      path: `${this.#base}/url`,
      json: { path, operation, expiresInSeconds: options.expiresInSeconds, user: options.user },
      signal: options.signal,
    })
    // on the address this client knows the server by (the server's own may be a proxy's inside)
    return new URL(res.path, this.#http.url).toString()
  }

  /**
   * Watches a directory: each change (create, write, remove, rename, chmod) goes to `onChange` as
   * it happens. Resolves once the watch is set up; `stop()` the handle (or abort `signal`) to end it.
   */
  watch(
    path: string,
    onChange: (change: FileChange) => void | Promise<void>,
    options: WatchOptions = {},
  ): Promise<WatchHandle> {
    return watchDir(this.#http, this.#base, path, onChange, options)
  }
}
