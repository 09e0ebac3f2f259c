// The in-process control plane on a real loopback port, and a proxy in front of it that cuts
// template build log streams mid-event: what a client sees when a connection drops.
import { createServer, type Server } from 'node:http'
import { connect, createServer as createTcpServer, type Socket, type Server as TcpServer } from 'node:net'
import { getRequestListener } from '@hono/node-server'
import type { ControlPlane } from '../../../apps/server/src/index.ts'

export interface Listening {
  url: string
  close(): Promise<void>
}

function address(server: Server | TcpServer): string {
  const a = server.address()
  if (!a || typeof a === 'string') throw new Error('not listening on a port')
  return `http://127.0.0.1:${a.port}`
}

async function listening(server: Server | TcpServer, sockets: Set<Socket>): Promise<Listening> {
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: address(server),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

export function serveOverTcp(cp: ControlPlane): Promise<Listening> {
  const server = createServer(getRequestListener(cp.app.fetch))
  return listening(server, new Set())
}

/**
 * Forwards to `target`; a response to `GET /v1/builds/.../logs` from offset 0 is cut after the
 * first bytes of its `afterLines`-th `log` event (both sockets destroyed). Resumed streams
 * (offset > 0 or Last-Event-ID) pass whole. `cuts` counts the streams cut.
 */
export async function cuttingProxy(target: string, afterLines: number): Promise<Listening & { cuts(): number }> {
  const port = Number(new URL(target).port)
  let cuts = 0
  const sockets = new Set<Socket>()
  const server = createTcpServer((client) => {
    const upstream = connect(port, '127.0.0.1')
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
    let cutThis = false
    client.on('data', (chunk: Buffer) => {
      const head = chunk.toString('latin1')
      // one request at a time per connection: the newest request line decides its response
      const line = /^(GET|POST|PUT|DELETE|PATCH) (\S+)/m.exec(head)
      if (line?.[2]) {
        const url = new URL(line[2], 'http://x')
        cutThis =
          /^\/v1\/builds\/[^/]+\/logs$/.test(url.pathname) &&
          (url.searchParams.get('offset') ?? '0') === '0' &&
          !/^last-event-id:/im.test(head)
      }
      upstream.write(chunk)
    })
    let seen = ''
    upstream.on('data', (chunk: Buffer) => {
      if (!cutThis) {
        client.write(chunk)
        return
      }
      const before = seen.length
      seen += chunk.toString('latin1')
      let at = -1
      for (let i = 0, from = 0; i < afterLines; i++) {
        at = seen.indexOf('event: log', from)
        if (at < 0) break
        from = at + 1
      }
      if (at < 0) {
        client.write(chunk)
        return
      }
      cuts++
      client.write(chunk.subarray(0, Math.max(0, at + 'event: l'.length - before)), () => {
        client.destroy()
        upstream.destroy()
      })
    })
    upstream.on('end', () => client.end())
    client.on('end', () => upstream.end())
  })
  const l = await listening(server, sockets)
  return { ...l, cuts: () => cuts }
}
