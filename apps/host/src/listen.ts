// Starting an HTTP server on a port (0: any free one) and the URL it is reached at.
import type { Server } from 'node:http'

export async function listen(server: Server, port: number, host: string): Promise<{ port: number; url: string }> {
  server.listen(port, host)
  const bound = await new Promise<number>((resolve, reject) => {
    server.once('listening', () => {
      const addr = server.address()
      resolve(typeof addr === 'object' && addr ? addr.port : port)
    })
    server.once('error', reject)
  })
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host
  return { port: bound, url: `http://${shown}:${bound}` }
}
