// `client.keys`: API key administration (admin key only).
import type { ApiKeyInfo } from '@forkbox/protocol'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'

/** A new key with its secret, which the server shows only this once. */
export type CreatedKey = ApiKeyInfo & { key: string }

export class Keys {
  readonly #http: HttpClient

  /** @internal Reached through `client.keys`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  /** `format: 'e2b'` issues `e2b_<hex>`, for the E2B clients (docs/e2b.md). */
  async create(name: string, options: RequestOptions & { format?: 'forkbox' | 'e2b' } = {}): Promise<CreatedKey> {
    const json = options.format ? { name, format: options.format } : { name }
    return this.#http.json<CreatedKey>({ method: 'POST', path: '/v1/keys', json, signal: options.signal })
  }

  async list(options: RequestOptions = {}): Promise<ApiKeyInfo[]> {
    const res = await this.#http.json<{ keys: ApiKeyInfo[] }>({
      method: 'GET',
      path: '/v1/keys',
      signal: options.signal,
    })
    return res.keys
  }

  async revoke(id: string, options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'DELETE', path: pathOf('v1', 'keys', id), signal: options.signal })
  }
}
