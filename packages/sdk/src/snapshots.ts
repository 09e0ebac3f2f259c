// `client.snapshots`: the snapshots this key has made (see `sandbox.snapshot()`).
import type { Snapshot as SnapshotInfo } from '@forkbox/protocol'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'

export class Snapshots {
  readonly #http: HttpClient

  /** @internal Reached through `client.snapshots`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  /** Newest first; `name`: only the snapshot of that name. */
  async list(options: RequestOptions & { name?: string } = {}): Promise<SnapshotInfo[]> {
    const res = await this.#http.json<{ snapshots: SnapshotInfo[] }>({
      method: 'GET',
      path: options.name ? `/v1/snapshots?name=${encodeURIComponent(options.name)}` : '/v1/snapshots',
      signal: options.signal,
    })
    return res.snapshots
  }

  async delete(id: string, options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({ method: 'DELETE', path: pathOf('v1', 'snapshots', id), signal: options.signal })
  }
}
