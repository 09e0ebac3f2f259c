// Starting the HTTP(S) server of a host on a port (0: any free one), and the URL it is reached at.
import { readFileSync, unwatchFile, watchFile } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import type { Duplex } from 'node:stream'
import type { ControlPlane } from '@forkbox/server'
import { getRequestListener } from '@hono/node-server'
import { tlsOf } from './config.ts'

/** PEM files: a certificate chain for the API's name and `*.{sandboxDomain}`, and its key. */
export interface TlsFiles {
  certFile: string
  keyFile: string
}

export interface Served {
  server: Server
  port: number
  url: string
  close(): Promise<void>
}

/** Sent on every HTTPS response: a year. Not `includeSubDomains`: the sandbox domain may be another's. */
export const HSTS = 'max-age=31536000'

/** How often certificate files are looked at for a renewal (it is loaded without a restart). */
const CERT_POLL_MS = 30_000

export async function listen(
  server: Server,
  port: number,
  host: string,
  tls = false,
): Promise<{ port: number; url: string }> {
  server.listen(port, host)
  const bound = await new Promise<number>((resolve, reject) => {
    server.once('listening', () => {
      const addr = server.address()
      resolve(typeof addr === 'object' && addr ? addr.port : port)
    })
    server.once('error', reject)
  })
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host
  return { port: bound, url: `${tls ? 'https' : 'http'}://${shown}:${bound}` }
}

/** Serves a control plane (`forkbox up`'s or a replica's) on the host's port, over HTTPS when the config names TLS files. */
export function serveControlPlane(
  cp: ControlPlane,
  config: { port: number; host: string; tlsCertFile?: string; tlsKeyFile?: string },
): Promise<Served> {
  const tls = tlsOf(config)
  const listener = getRequestListener(cp.app.fetch)
  // over HTTPS, browsers are told to come back only that way (the API and the exposed ports)
  const handler = tls
    ? (req: IncomingMessage, res: ServerResponse) => {
        res.setHeader('Strict-Transport-Security', HSTS)
        return listener(req, res)
      }
    : listener
  return serve(handler, cp.upgrade, {
    port: config.port,
    host: config.host,
    tls,
    onCertError: (err) => cp.log.error({ err }, 'reloading the TLS certificate failed'),
  })
}

/**
 * Serves `handler` (and WebSocket upgrades) over HTTP, or over HTTPS when `tls` names the files;
 * renewed certificate files are picked up while it runs.
 */
export async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void,
  opts: { port: number; host: string; tls?: TlsFiles; onCertError?: (err: unknown) => void; certPollMs?: number },
): Promise<Served> {
  const { tls } = opts
  const read = (t: TlsFiles) => ({ cert: readFileSync(t.certFile), key: readFileSync(t.keyFile) })
  const server: Server = tls ? createTlsServer(read(tls), handler) : createServer(handler)
  server.on('upgrade', upgrade)
  const reload = () => {
    if (!tls) return
    try {
      ;(server as ReturnType<typeof createTlsServer>).setSecureContext(read(tls))
    } catch (err) {
      // a half-written renewal: the old certificate serves on until the next look
      opts.onCertError?.(err)
    }
  }
  if (tls)
    for (const f of [tls.certFile, tls.keyFile])
      watchFile(f, { interval: opts.certPollMs ?? CERT_POLL_MS, persistent: false }, reload)
  const { port, url } = await listen(server, opts.port, opts.host, tls !== undefined)
  return {
    server,
    port,
    url,
    async close() {
      if (tls) for (const f of [tls.certFile, tls.keyFile]) unwatchFile(f, reload)
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
