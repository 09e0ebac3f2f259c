// The one place requests are made: auth, JSON, error mapping and the bounded retry policy.
import { requireApiKey, resolveConfig } from './config.ts'
import { fetchableBytes } from './encoding.ts'
import { ConnectionError, errorFor, ForkboxError } from './errors.ts'

/** Where to connect and how; every field falls back as described in `resolveConfig`. */
export interface ConnectionOptions {
  apiKey?: string
  url?: string
  /** Replaces `globalThis.fetch`, e.g. to route requests to an in-process server. */
  fetch?: typeof fetch
  /** Retries for 429, 503 and (GET/DELETE only) connection errors; default 2. */
  maxRetries?: number
}

export interface RequestOptions {
  signal?: AbortSignal
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

export type Query = Record<string, string | number | boolean | undefined>

export interface RequestSpec extends RequestOptions {
  method: HttpMethod
  path: string
  query?: Query
  json?: unknown
  /** A stream is sent as it is read, so a request with one is never retried (it cannot be replayed). */
  body?: Uint8Array | ReadableStream<Uint8Array>
  /** The body's Content-Type; default application/octet-stream. */
  contentType?: string
  /** The Accept header; default application/json. */
  accept?: string
  /** More headers (the SDK's own: authorization, accept and content-type are set above). */
  headers?: Record<string, string>
}

const DEFAULT_MAX_RETRIES = 2
const RETRY_BASE_DELAY_MS = 200
const MAX_RETRY_DELAY_MS = 5000
const RETRYABLE_STATUSES = new Set([429, 503])
// A connection error on a non-idempotent call may come after the server acted; never repeat those.
const CONNECTION_RETRY_METHODS = new Set<HttpMethod>(['GET', 'DELETE'])

/** Picks the connection fields out of a larger option bag. */
export function connectionOptions(options: ConnectionOptions): ConnectionOptions {
  const { apiKey, url, fetch, maxRetries } = options
  return { apiKey, url, fetch, maxRetries }
}

/** `/a/b` from segments, each percent-encoded. */
export function pathOf(...segments: string[]): string {
  return segments.map((s) => `/${encodeURIComponent(s)}`).join('')
}

export function queryString(query: Query | undefined): string {
  if (!query) return ''
  const parts: string[] = []
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue
    parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`)
  }
  return parts.length > 0 ? `?${parts.join('&')}` : ''
}

function isAbort(err: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || (err instanceof Error && err.name === 'AbortError')
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

function retryDelayMs(attempt: number, retryAfter: string | null): number {
  const seconds = retryAfter === null ? Number.NaN : Number(retryAfter)
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_RETRY_DELAY_MS)
  const exp = RETRY_BASE_DELAY_MS * 2 ** attempt
  return Math.min(exp / 2 + Math.random() * (exp / 2), MAX_RETRY_DELAY_MS)
}

function describe(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined
  if (cause instanceof Error) return cause.message
  return err instanceof Error ? err.message : String(err)
}

export class HttpClient {
  readonly url: string
  readonly #apiKey: string
  readonly #fetch: typeof fetch
  readonly #maxRetries: number

  constructor(options: ConnectionOptions = {}) {
    const config = resolveConfig(options)
    this.#apiKey = requireApiKey(config)
    if (!URL.canParse(config.url)) throw new ForkboxError('INVALID_CONFIG', `invalid forkbox URL: ${config.url}`)
    this.url = config.url
    // called as a plain function: browsers' fetch throws "Illegal invocation" with another `this`
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    this.#maxRetries = Math.max(0, options.maxRetries ?? DEFAULT_MAX_RETRIES)
  }

  /** The key, for connections fetch cannot make (terminals' WebSockets). */
  get apiKey(): string {
    return this.#apiKey
  }

  async json<T>(spec: RequestSpec): Promise<T> {
    const res = await this.send(spec)
    const text = await res.text()
    try {
      return JSON.parse(text) as T
    } catch (err) {
      throw new ForkboxError('UNEXPECTED_RESPONSE', `expected JSON from ${spec.method} ${spec.path}`, {
        status: res.status,
        requestId: res.headers.get('x-request-id') ?? undefined,
        cause: err,
      })
    }
  }

  async bytes(spec: RequestSpec): Promise<Uint8Array> {
    const res = await this.send(spec)
    return new Uint8Array(await res.arrayBuffer())
  }

  async empty(spec: RequestSpec): Promise<void> {
    const res = await this.send(spec)
    await res.body?.cancel()
  }

  /** Sends with retries; resolves with a 2xx response, rejects with a ForkboxError or the abort reason. */
  async send(spec: RequestSpec): Promise<Response> {
    const target = `${this.url}${spec.path}${queryString(spec.query)}`
    const headers: Record<string, string> = {
      ...spec.headers,
      authorization: `Bearer ${this.#apiKey}`,
      accept: spec.accept ?? 'application/json',
    }
    let body: string | Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array> | undefined
    if (spec.json !== undefined) {
      headers['content-type'] = 'application/json'
      body = JSON.stringify(spec.json)
    } else if (spec.body !== undefined) {
      headers['content-type'] = spec.contentType ?? 'application/octet-stream'
      body = spec.body instanceof ReadableStream ? spec.body : fetchableBytes(spec.body)
    }
    const streamed = body instanceof ReadableStream
    const maxRetries = streamed ? 0 : this.#maxRetries
    // a stream body needs half-duplex (Node's fetch refuses one without it)
    const init: RequestInit & { duplex?: 'half' } = { method: spec.method, headers, body, signal: spec.signal }
    if (streamed) init.duplex = 'half'
    for (let attempt = 0; ; attempt++) {
      let res: Response
      try {
        res = await this.#fetch(target, init)
      } catch (err) {
        if (isAbort(err, spec.signal)) throw spec.signal?.reason ?? err
        if (attempt < maxRetries && CONNECTION_RETRY_METHODS.has(spec.method)) {
          await sleep(retryDelayMs(attempt, null), spec.signal)
          continue
        }
        throw new ConnectionError('CONNECTION_ERROR', `cannot reach forkbox at ${this.url}: ${describe(err)}`, {
          cause: err,
        })
      }
      if (res.ok) return res
      // a 429 without Retry-After is a quota (QUOTA_EXCEEDED), which waiting does not free
      const retryAfter = res.headers.get('retry-after')
      const quota = res.status === 429 && retryAfter === null
      if (RETRYABLE_STATUSES.has(res.status) && attempt < maxRetries && !quota) {
        await res.body?.cancel()
        await sleep(retryDelayMs(attempt, retryAfter), spec.signal)
        continue
      }
      const text = await res.text().catch(() => '')
      throw errorFor(spec.method, spec.path, res, text)
    }
  }
}
