// Server-Sent Events as the server sends them: `event:` + one `data:` line of JSON per event.
import { type ErrorBody, errorStatus, isErrorCode } from '@forkbox/protocol'
import { errorFromResponse, type ForkboxError } from './errors.ts'

export async function* serverSentEvents(res: Response): AsyncGenerator<{ event: string; payload: unknown }> {
  if (!res.body) return
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true })
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      let event = 'message'
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim()
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
      }
      if (data.length > 0) yield { event, payload: JSON.parse(data.join('\n')) }
    }
  }
}

/** An `error` event as the typed error a plain response with its code would have given. */
export function eventError(payload: unknown, res: Response): ForkboxError {
  const code = (payload as ErrorBody).error?.code
  const status = isErrorCode(code) ? errorStatus[code] : 500
  return errorFromResponse(status, JSON.stringify(payload), res.headers.get('x-request-id'))
}
