// Static files (the dashboard's, the API reference's) as the request's Accept-Encoding asks:
// brotli, gzip or as stored, never compressed per request. Each file's encodings come from the
// build (`NAME.br` / `NAME.gz` beside it, as new as it) or are made once here and kept until the
// file changes on disk; each has its own ETag, so a revalidation answers 304.
import { createHash } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'
import type { Context } from 'hono'

export type ContentEncoding = 'br' | 'gzip' | 'identity'

export interface StaticFile {
  type: string
  /** The file's bodies by encoding; `identity` always, the others when the type is worth compressing. */
  bodies: Partial<Record<ContentEncoding, Uint8Array<ArrayBuffer>>> & { identity: Uint8Array<ArrayBuffer> }
  /** The strong validator of the identity body; an encoded body's is this with `-br` / `-gzip`. */
  etag: string
}

export interface StaticResponseOptions {
  cacheControl: string
  headers?: Record<string, string>
}

const SUFFIX = { br: '.br', gzip: '.gz' } as const
// smaller bodies fit in a packet or two as they are; images and fonts are compressed already
const MIN_COMPRESSED_BYTES = 1024
const COMPRESSIBLE = /^(text\/|application\/(json|javascript)|image\/svg\+xml)/
// made here only when the build did not: quality 9 is within 10% of 11's size at a twentieth of its time
const BROTLI_QUALITY = 9

const compressBrotli = promisify(brotliCompress)
const compressGzip = promisify(gzip)

/** Cached by path; a change of size or mtime loads the file again (the dashboard rebuilt in place). */
const loaded = new Map<string, { version: string; file: Promise<StaticFile> }>()

/**
 * The encoding to send: the acceptable one (q > 0, named or by `*`) with the highest q, brotli
 * before gzip on a tie; identity when neither is acceptable or the file has no encoded body.
 */
export function chooseEncoding(
  acceptEncoding: string | undefined,
  available: readonly ContentEncoding[] = ['br', 'gzip'],
): ContentEncoding {
  const q = new Map<string, number>()
  for (const part of (acceptEncoding ?? '').split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';')
    if (!name) continue
    const weight = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    const value = weight === undefined ? 1 : Number(weight.slice(2))
    q.set(name, Number.isFinite(value) ? value : 0)
  }
  let best: ContentEncoding = 'identity'
  let bestQ = 0
  for (const encoding of ['br', 'gzip'] as const) {
    const weight = q.get(encoding) ?? q.get('*') ?? 0
    if (available.includes(encoding) && weight > bestQ) {
      best = encoding
      bestQ = weight
    }
  }
  return best
}

/** The file at `path` with its encodings, or null when there is no such file. */
export async function loadStaticFile(path: string, type: string): Promise<StaticFile | null> {
  const info = await stat(path).catch(() => null)
  if (!info?.isFile()) {
    loaded.delete(path)
    return null
  }
  const version = `${info.size}:${info.mtimeMs}`
  const cached = loaded.get(path)
  if (cached?.version === version) return cached.file
  const file = readStaticFile(path, type, info.mtimeMs)
  loaded.set(path, { version, file })
  // a failed read is not kept: the next request tries again
  file.catch(() => loaded.get(path)?.file === file && loaded.delete(path))
  return file
}

async function readStaticFile(path: string, type: string, mtimeMs: number): Promise<StaticFile> {
  const identity = new Uint8Array(await readFile(path))
  return staticFileOf(identity, type, (encoding) => built(`${path}${SUFFIX[encoding]}`, mtimeMs))
}

/**
 * `identity` as a static file of `type`, its encodings taken from `built` where it has them and
 * made here otherwise: call it once per body, not per request.
 */
export async function staticFileOf(
  identity: Uint8Array<ArrayBuffer>,
  type: string,
  built: (encoding: 'br' | 'gzip') => Promise<Buffer | null> = async () => null,
): Promise<StaticFile> {
  const etag = createHash('sha256').update(identity).digest('base64url').slice(0, 22)
  const bodies: StaticFile['bodies'] = { identity }
  if (identity.length >= MIN_COMPRESSED_BYTES && COMPRESSIBLE.test(type)) {
    const [br, gz] = await Promise.all([
      built('br').then(
        (body) =>
          body ??
          compressBrotli(identity, {
            params: {
              [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
              [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
            },
          }),
      ),
      built('gzip').then((body) => body ?? compressGzip(identity, { level: 9 })),
    ])
    bodies.br = new Uint8Array(br)
    bodies.gzip = new Uint8Array(gz)
  }
  return { type, bodies, etag }
}

/** The build's encoded copy at `path` when it is at least as new as the file, else null. */
async function built(path: string, mtimeMs: number): Promise<Buffer | null> {
  const info = await stat(path).catch(() => null)
  return info && info.mtimeMs >= mtimeMs ? await readFile(path).catch(() => null) : null
}

/** `file` in the encoding the request accepts, or 304 when the client holds that body already. */
export function staticResponse(c: Context, file: StaticFile, options: StaticResponseOptions): Response {
  const available = (['br', 'gzip'] as const).filter((e) => file.bodies[e] !== undefined)
  const encoding = chooseEncoding(c.req.header('accept-encoding'), available)
  const body = file.bodies[encoding] ?? file.bodies.identity
  const etag = `"${file.etag}${encoding === 'identity' ? '' : `-${encoding}`}"`
  const headers: Record<string, string> = {
    ...options.headers,
    'cache-control': options.cacheControl,
    etag,
  }
  // a cache must not hand one client's encoding to a client that cannot read it
  if (available.length > 0) headers.vary = 'Accept-Encoding'
  if (matches(c.req.header('if-none-match'), etag)) return c.body(null, 304, headers)
  headers['content-type'] = file.type
  headers['content-length'] = String(body.length)
  if (encoding !== 'identity') headers['content-encoding'] = encoding
  return c.body(body, 200, headers)
}

/** If-None-Match's weak comparison: `*`, or any listed tag equal to `etag` with `W/` ignored. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim()
    return tag === '*' || tag.replace(/^W\//, '') === etag
  })
}
