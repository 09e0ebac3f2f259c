// HTTP upgrades (terminals, WebSockets to exposed ports) go through the same app as every other
// request: its routes match them, its credentials check them, its errors answer them. A route
// that takes the socket over answers RESPONSE_ALREADY_SENT; any other answer is written back on
// the socket, which is then closed.
import { type IncomingMessage, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import type { App } from './env.ts'

/** What a route answers once it has taken the request (or the upgraded socket) over. */
export const TAKEN_OVER = RESPONSE_ALREADY_SENT
const taken = (res: Response) => res === TAKEN_OVER || res.headers.has('x-hono-already-sent')

function requestOf(req: IncomingMessage): Request {
  const headers = new Headers()
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string)
  return new Request(new URL(req.url ?? '/', 'http://localhost'), { method: req.method, headers })
}

/** Answers an upgrade request on its raw socket with `body` (JSON) and closes it, at once. */
export function refuseOnSocket(socket: Duplex, status: number, body: Buffer, headers: [string, string][] = []): void {
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`]
  for (const [k, v] of headers) if (k !== 'content-length' && k !== 'connection') lines.push(`${k}: ${v}`)
  lines.push(`content-length: ${body.length}`, 'connection: close')
  socket.end(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), body]))
}

/** Writes a (small) response on a raw socket and closes it. */
async function writeOnSocket(socket: Duplex, res: Response): Promise<void> {
  const body = Buffer.from(await res.arrayBuffer())
  const headers: [string, string][] = []
  res.headers.forEach((v, k) => {
    headers.push([k, v])
  })
  refuseOnSocket(socket, res.status, body, headers)
}

/** For the Node server's 'upgrade' event. */
export function upgradeListener(app: App) {
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Node hands an upgrade's socket over without its error listener: a client resetting it
    // must not become an uncaught 'error'
    socket.on('error', () => {})
    let request: Request
    try {
      request = requestOf(req)
    } catch {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
      return
    }
    Promise.resolve(app.fetch(request, { incoming: req, upgrade: { socket, head } }))
      .then((res) => (taken(res) ? undefined : writeOnSocket(socket, res)))
      .catch(() => socket.destroy())
  }
}
