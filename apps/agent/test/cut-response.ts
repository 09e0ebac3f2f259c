// For tests of resumed transfers: a response that drops its connection part way.
import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * `cut=N` in a first request's query (one without `offset=`): the connection drops once about N
 * bytes of body went out. A resumed request (it carries `offset`) is answered whole.
 */
export function cutFirstResponse(req: IncomingMessage, res: ServerResponse): void {
  const cut = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('cut') ?? 0)
  if (cut <= 0 || req.url?.includes('offset=')) return
  let sent = 0
  const write = res.write.bind(res) as (chunk: Buffer, ...rest: unknown[]) => boolean
  res.write = ((chunk: Buffer, ...rest: unknown[]) => {
    sent += chunk.length
    if (sent > cut) {
      res.socket?.destroy()
      return false
    }
    return write(chunk, ...rest)
  }) as typeof res.write
}
