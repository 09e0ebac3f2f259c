// `client.templates`: the templates sandboxes can be created from.
import type { TemplateInfo } from '@forkbox/protocol'
import type { HttpClient, RequestOptions } from './http.ts'

export class Templates {
  readonly #http: HttpClient

  /** @internal Reached through `client.templates`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  async list(options: RequestOptions = {}): Promise<TemplateInfo[]> {
    const res = await this.#http.json<{ templates: TemplateInfo[] }>({
      method: 'GET',
      path: '/v1/templates',
      signal: options.signal,
    })
    return res.templates
  }
}
