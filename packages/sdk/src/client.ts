// The account-level client: key administration and templates; sandboxes live on `Sandbox`.
import { type ConnectionOptions, connectionOptions, HttpClient } from './http.ts'
import { Keys } from './keys.ts'
import { Snapshots } from './snapshots.ts'
import { Templates } from './templates.ts'

export type ForkboxClientOptions = ConnectionOptions

export class ForkboxClient {
  /** The resolved server URL. */
  readonly url: string
  readonly keys: Keys
  readonly templates: Templates
  readonly snapshots: Snapshots

  /** Throws AuthenticationError when no API key can be found. */
  constructor(options: ForkboxClientOptions = {}) {
    const http = new HttpClient(connectionOptions(options))
    this.url = http.url
    this.keys = new Keys(http)
    this.templates = new Templates(http)
    this.snapshots = new Snapshots(http)
  }
}
