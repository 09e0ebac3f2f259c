// Exposed ports: `/s/{id}/{port}/{path}` reaches port {port} of sandbox {id} (HTTP and WebSocket),
// for the owner's API key or the sandbox's access token (X-Forkbox-Access-Token, or
// `?forkbox_token=` once, which sets a cookie scoped to that sandbox's prefix, for browsers).
// Only ports the sandbox lists in `network.ports` are served. Our credentials never reach the sandbox.
import { randomBytes } from 'node:crypto'
import { type IncomingHttpHeaders, type IncomingMessage, request, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import type { Duplex } from 'node:stream'
import { AppError, errorStatus } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { SandboxService } from '../services/sandboxes.ts'
import type { KeyStore } from '../store/keys.ts'

const PATH = /^\/s\/([A-Za-z0-9_-]{1,64})\/(\d{1,5})(\/.*)?$/
const TOKEN_PARAM = 'forkbox_token'
const cookieName = (id: string) => `forkbox_token_${id.replace(/[^A-Za-z0-9_]/g, '_')}`

interface Target {
  host: string
  port: number
  /** Path and query to ask the sandbox for. */
  path: string
  headers: IncomingHttpHeaders
  /** Set when the token came in the query: remember it for the rest of the browser's requests. */
  setCookie?: string
  /** The exchange is over (the sandbox may count as idle again). */
  done: () => void
}

function cookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>()
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=')
    if (i > 0) out.set(part.slice(0, i).trim(), part.slice(i + 1).trim())
  }
  return out
}

export function portProxy(deps: { keys: KeyStore; sandboxes: SandboxService; log: Logger }) {
  /** Authenticates and locates the port; null: not an exposed-port URL. */
  async function target(req: IncomingMessage): Promise<Target | null> {
    const url = new URL(req.url ?? '/', 'http://x')
    const m = PATH.exec(url.pathname)
    if (!m) return null
    const id = m[1] as string
    const port = Number(m[2])
    if (port < 1 || port > 65535) throw new AppError('VALIDATION_FAILED', `port ${port} is not a TCP port`)
    const headers = { ...req.headers }
    const jar = cookies(headers.cookie)
    const bearer = headers.authorization && /^Bearer\s+(\S+)$/i.exec(headers.authorization)?.[1]
    const key = bearer || (headers['x-api-key'] as string | undefined)
    const queryToken = url.searchParams.get(TOKEN_PARAM)
    const token = (headers['x-forkbox-access-token'] as string | undefined) || queryToken || jar.get(cookieName(id))
    let credential: { owner: string } | { accessToken: string }
    const principal = key ? deps.keys.authenticate(key) : null
    if (principal) {
      credential = { owner: principal.keyId }
      if (bearer) delete headers.authorization
    } else if (token) credential = { accessToken: token }
    else throw new AppError('UNAUTHENTICATED', 'an API key or the sandbox access token is required')
    const { host, done } = await deps.sandboxes.portTarget(credential, id, port)
    delete headers['x-api-key']
    delete headers['x-forkbox-access-token']
    if (jar.has(cookieName(id))) {
      jar.delete(cookieName(id))
      if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
      else delete headers.cookie
    }
    url.searchParams.delete(TOKEN_PARAM)
    const prefix = `/s/${id}/${port}`
    headers['x-forwarded-prefix'] = prefix
    headers['x-forwarded-host'] = req.headers.host ?? ''
    headers['x-forwarded-proto'] = 'http'
    return {
      host,
      port,
      path: `${m[3] ?? '/'}${url.search}`,
      headers,
      setCookie: queryToken ? `${cookieName(id)}=${queryToken}; Path=${prefix}/; HttpOnly; SameSite=Lax` : undefined,
      done,
    }
  }

  function fail(err: unknown): { status: number; body: string } {
    const e =
      err instanceof AppError
        ? err
        : new AppError(
            'PORT_UNREACHABLE',
            `the sandbox did not answer on that port: ${String((err as Error)?.message ?? err)}`,
          )
    const requestId = `req_${randomBytes(8).toString('hex')}`
    return {
      status: errorStatus[e.code],
      body: JSON.stringify({ error: { code: e.code, message: e.message, details: e.details, requestId } }),
    }
  }

  /** For the server's 'request' event: true when the request was for an exposed port (handled). */
  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (!req.url?.startsWith('/s/')) return false
    const reply = (err: unknown) => {
      if (res.headersSent) return res.destroy()
      const f = fail(err)
      res.writeHead(f.status, { 'content-type': 'application/json' }).end(f.body)
    }
    target(req)
      .then((t) => {
        if (!t) return reply(new AppError('NOT_FOUND', `no route ${req.method} ${req.url}`))
        const upstream = request(
          { host: t.host, port: t.port, method: req.method, path: t.path, headers: t.headers },
          (up) => {
            const headers = { ...up.headers }
            if (t.setCookie) headers['set-cookie'] = [...(headers['set-cookie'] ?? []), t.setCookie]
            res.writeHead(up.statusCode ?? 502, up.statusMessage, headers)
            up.pipe(res)
          },
        )
        upstream.on('error', reply)
        res.on('close', () => {
          upstream.destroy()
          t.done()
        })
        req.pipe(upstream)
      })
      .catch(reply)
    return true
  }

  /** For the server's 'upgrade' event (WebSocket and other upgrades): true when handled. */
  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (!req.url?.startsWith('/s/')) return false
    const refuse = (err: unknown) => {
      const f = fail(err)
      socket.end(
        `HTTP/1.1 ${f.status} Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(f.body)}\r\nConnection: close\r\n\r\n${f.body}`,
      )
    }
    socket.on('error', () => {})
    target(req)
      .then((t) => {
        if (!t) return refuse(new AppError('NOT_FOUND', `no route ${req.url}`))
        const up = connect(t.port, t.host)
        // over once either side is gone (a client that only half-closes counts as gone)
        up.once('close', t.done)
        socket.once('end', t.done)
        socket.once('close', t.done)
        up.once('error', refuse)
        up.once('connect', () => {
          up.off('error', refuse)
          up.on('error', () => socket.destroy())
          socket.on('close', () => up.destroy())
          up.on('close', () => socket.destroy())
          const lines = [`${req.method} ${t.path} HTTP/1.1`]
          for (const [k, v] of Object.entries(t.headers)) {
            for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) lines.push(`${k}: ${one}`)
          }
          up.write(`${lines.join('\r\n')}\r\n\r\n`)
          if (head.length) up.write(head)
          socket.pipe(up)
          up.pipe(socket)
        })
      })
      .catch(refuse)
    return true
  }

  return { handle, upgrade }
}
