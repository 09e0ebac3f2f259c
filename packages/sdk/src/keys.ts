// `client.keys`: API keys (admin key; a key may read and rotate itself as `me`), and a key's usage
// and the audit log.
import type { ApiKeyInfo, AuditEntry, KeyQuotas, KeyRateLimits, KeyScopes, UsageReport } from '@forkbox/protocol'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'

/** A new key (or a rotated one) with its secret, which the server shows only this once. */
export type CreatedKey = ApiKeyInfo & { key: string }

export interface CreateKeyOptions extends RequestOptions {
  /** `e2b` issues `e2b_<hex>`, for the E2B clients (docs/e2b.md). */
  format?: 'forkbox' | 'e2b'
  scopes?: KeyScopes
  quotas?: KeyQuotas
  rateLimits?: KeyRateLimits
  /** The key is refused after this many seconds. */
  ttlSeconds?: number
}

/** What a change of a key replaces (`{}` clears quotas, rate limits or scopes; `expiresAt: null` ends the expiry). */
export interface UpdateKeyOptions extends RequestOptions {
  name?: string
  scopes?: KeyScopes
  quotas?: KeyQuotas
  rateLimits?: KeyRateLimits
  expiresAt?: string | Date | null
}

export interface UsageOptions extends RequestOptions {
  from: string | Date
  /** Default: now. */
  to?: string | Date
  /** Default `day`. */
  granularity?: 'hour' | 'day' | 'total'
  /** Admin: another key's usage, or `all`. */
  key?: string
}

export interface AuditOptions extends RequestOptions {
  from?: string | Date
  to?: string | Date
  key?: string
  action?: string
  /** Entries per page (default 100, at most 1000). */
  pageSize?: number
}

function iso(t: string | Date | undefined): string | undefined {
  return t instanceof Date ? t.toISOString() : t
}

export class Keys {
  readonly #http: HttpClient

  /** @internal Reached through `client.keys`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  async create(name: string, options: CreateKeyOptions = {}): Promise<CreatedKey> {
    const { signal, ...rest } = options
    return this.#http.json<CreatedKey>({ method: 'POST', path: '/v1/keys', json: { name, ...rest }, signal })
  }

  async list(options: RequestOptions = {}): Promise<ApiKeyInfo[]> {
    const res = await this.#http.json<{ keys: ApiKeyInfo[] }>({
      method: 'GET',
      path: '/v1/keys',
      signal: options.signal,
    })
    return res.keys
  }

  /** A key by id; `me`: the caller's own. */
  async get(id: string, options: RequestOptions = {}): Promise<ApiKeyInfo> {
    return this.#http.json<ApiKeyInfo>({ method: 'GET', path: pathOf('v1', 'keys', id), signal: options.signal })
  }

  async update(id: string, options: UpdateKeyOptions): Promise<ApiKeyInfo> {
    const { signal, expiresAt, ...rest } = options
    const json = expiresAt === undefined ? rest : { ...rest, expiresAt: iso(expiresAt ?? undefined) ?? null }
    return this.#http.json<ApiKeyInfo>({ method: 'PATCH', path: pathOf('v1', 'keys', id), json, signal })
  }

  /**
   * A new secret for key `id` (`me`: the caller's own); the old one still works for `graceSeconds`
   * (default 3600), time to roll the new one out.
   */
  async rotate(id: string, options: RequestOptions & { graceSeconds?: number } = {}): Promise<CreatedKey> {
    const { signal, graceSeconds } = options
    const json = graceSeconds === undefined ? {} : { graceSeconds }
    return this.#http.json<CreatedKey>({ method: 'POST', path: pathOf('v1', 'keys', id, 'rotate'), json, signal })
  }

  async revoke(id: string, options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'DELETE', path: pathOf('v1', 'keys', id), signal: options.signal })
  }

  /** What a key used (the caller's own unless an admin names `key`), in buckets. */
  async usage(options: UsageOptions): Promise<UsageReport> {
    return this.#http.json<UsageReport>({
      method: 'GET',
      path: '/v1/usage',
      query: {
        from: iso(options.from),
        to: iso(options.to),
        granularity: options.granularity,
        key: options.key,
      },
      signal: options.signal,
    })
  }

  /** The audit log (admin), oldest first, every page of it. */
  async *audit(options: AuditOptions = {}): AsyncGenerator<AuditEntry> {
    let after: number | null | undefined
    do {
      const page: { entries: AuditEntry[]; next: number | null } = await this.#http.json({
        method: 'GET',
        path: '/v1/audit',
        query: {
          from: iso(options.from),
          to: iso(options.to),
          key: options.key,
          action: options.action,
          limit: options.pageSize,
          after: after ?? undefined,
        },
        signal: options.signal,
      })
      yield* page.entries
      after = page.next
    } while (after !== null)
  }
}
