// Server-Sent Events from our server: the stream parsed by eventsource-parser, each event's data as JSON.
import { type ErrorBody, errorStatus, isErrorCode } from '@forkbox/protocol'
import { EventSourceParserStream } from 'eventsource-parser/stream'
import { errorFromResponse, type ForkboxError } from './errors.ts'

export interface ServerSentEvent {
  /** The `event:` field; `message` when the server sent none. */
  event: string
  /** The `id:` field, when the server sent one. */
  id: string | undefined
  payload: unknown
}

/**
 * The response's events as they arrive. `signal` aborting ends the stream with its reason even
 * where the fetch in use does not cut a response body already under way.
 */
export async function* serverSentEvents(res: Response, signal?: AbortSignal): AsyncGenerator<ServerSentEvent> {
  if (!res.body) return
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader()
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {})
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    for (;;) {
      signal?.throwIfAborted()
      const { done, value } = await reader.read()
      signal?.throwIfAborted()
      if (done) return
      yield { event: value.event ?? 'message', id: value.id, payload: JSON.parse(value.data) }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
    // a consumer that stops early must not leave the response streaming
    await reader.cancel().catch(() => {})
  }
}

/** An `error` event as the typed error a plain response with its code would have given. */
export function eventError(payload: unknown, res: Response): ForkboxError {
  const code = (payload as ErrorBody).error?.code
  const status = isErrorCode(code) ? errorStatus[code] : 500
  return errorFromResponse(status, JSON.stringify(payload), res.headers.get('x-request-id'))
}
