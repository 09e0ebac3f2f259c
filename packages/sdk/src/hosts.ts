// `client.hosts`: a fleet's hosts (admin key only): list, cordon, uncordon, drain.
import type { Host } from '@forkbox/protocol'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'

/** What a drain moved off the host, and what it could not. */
export interface DrainReport {
  /** Running sandboxes moved live (same ids). */
  migrated: string[]
  /** Images (hibernated sandboxes, snapshots) copied to other hosts. */
  moved: string[]
  failed: { id: string; code: string; message: string }[]
}

export class Hosts {
  readonly #http: HttpClient

  /** @internal Reached through `client.hosts`. */
  constructor(http: HttpClient) {
    this.#http = http
  }

  async list(options: RequestOptions = {}): Promise<Host[]> {
    const res = await this.#http.json<{ hosts: Host[] }>({ method: 'GET', path: '/v1/hosts', signal: options.signal })
    return res.hosts
  }

  /** No new sandboxes on it; what runs there carries on. */
  cordon(id: string, options: RequestOptions = {}): Promise<Host> {
    return this.#http.json<Host>({ method: 'POST', path: pathOf('v1', 'hosts', id, 'cordon'), signal: options.signal })
  }

  uncordon(id: string, options: RequestOptions = {}): Promise<Host> {
    return this.#http.json<Host>({
      method: 'POST',
      path: pathOf('v1', 'hosts', id, 'uncordon'),
      signal: options.signal,
    })
  }

  /** Cordons it and moves everything off it: running sandboxes live, images by copy. */
  drain(id: string, options: RequestOptions = {}): Promise<DrainReport> {
    return this.#http.json<DrainReport>({
      method: 'POST',
      path: pathOf('v1', 'hosts', id, 'drain'),
      signal: options.signal,
    })
  }
}
