// The account-level client: key administration and templates; sandboxes live on `Sandbox`.
import { type EventsOptions, type SandboxEvent, streamEvents } from './events.ts'
import { Hosts } from './hosts.ts'
import { type ConnectionOptions, connectionOptions, HttpClient } from './http.ts'
import { Keys } from './keys.ts'
import { Snapshots } from './snapshots.ts'
import { Templates } from './templates.ts'

export type ForkboxClientOptions = ConnectionOptions

export class ForkboxClient {
  /** The resolved server URL. */
  readonly url: string
  readonly keys: Keys
  /** A fleet's hosts (admin key; `forkbox up` has none). */
  readonly hosts: Hosts
  readonly templates: Templates
  readonly snapshots: Snapshots
  readonly #http: HttpClient

  /** Throws AuthenticationError when no API key can be found. */
  constructor(options: ForkboxClientOptions = {}) {
    const http = new HttpClient(connectionOptions(options))
    this.url = http.url
    this.keys = new Keys(http)
    this.hosts = new Hosts(http)
    this.templates = new Templates(http)
    this.snapshots = new Snapshots(http)
    this.#http = http
  }

  /** Lifecycle events of this key's sandboxes: past ones (after `since`), then live ones. */
  events(options: EventsOptions = {}): AsyncGenerator<SandboxEvent> {
    return streamEvents(this.#http, options)
  }
}
