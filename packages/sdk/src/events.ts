// Lifecycle events of the key's sandboxes, past then live.
import type { SandboxEvent, SandboxEventType } from '@forkbox/protocol'
import type { HttpClient, RequestOptions } from './http.ts'
import { eventError, serverSentEvents } from './sse.ts'

export type { SandboxEvent, SandboxEventType }

export interface EventsOptions extends RequestOptions {
  sandboxId?: string
  /** Only these types. */
  types?: SandboxEventType[]
  /** Only events after this id. */
  since?: number
}

/** Past events (after `since`), then each new one as it happens, until the loop breaks or `signal` aborts. */
export async function* streamEvents(http: HttpClient, options: EventsOptions): AsyncGenerator<SandboxEvent> {
  const res = await http.send({
    method: 'GET',
    path: '/v1/events',
    query: { sandboxId: options.sandboxId, type: options.types?.join(','), since: options.since },
    accept: 'text/event-stream',
    signal: options.signal,
  })
  try {
    for await (const { event, payload } of serverSentEvents(res)) {
      if (event === 'error') throw eventError(payload, res)
      yield payload as SandboxEvent
    }
  } finally {
    await res.body?.cancel().catch(() => {})
  }
}
