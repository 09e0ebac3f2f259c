// Exposed ports: `{port}-{id}.{domain}` (its own browser origin per sandbox and port) reaches
// port {port} of sandbox {id}, HTTP and WebSocket, for the owner's API key or the sandbox's access
// token (X-Forkbox-Access-Token, or `?forkbox_token=` once, which sets a cookie on that origin, for
// browsers). `/s/{id}/{port}/{path}` on the API's origin serves the same when the operator turns it
// on; there every sandbox shares one origin, so responses are sandboxed (CSP) and stripped of
// headers that act on the whole origin. Only ports the sandbox lists in `network.ports` are served.
// Our credentials never reach the sandbox; what the sandbox answers is untrusted input.
import { randomBytes } from 'node:crypto'
import {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  request,
  type ServerResponse,
} from 'node:http'
import { connect } from 'node:net'
import type { Duplex } from 'node:stream'
import { AppError, errorStatus } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { SandboxService } from '../services/sandboxes.ts'
import { type Authenticator, apiKeyIn } from './auth.ts'

const PATH = /^\/s\/([A-Za-z0-9_-]{1,64})\/(\d{1,5})(\/.*)?$/
const TOKEN_PARAM = 'forkbox_token'
const HOST_COOKIE = 'forkbox_token'
const pathCookie = (id: string) => `forkbox_token_${id.replace(/[^A-Za-z0-9_]/g, '_')}`

/**
 * On the shared origin of the path route: the page gets an opaque origin (no cookies, storage or
 * same-origin requests of the API's origin or of other sandboxes), and may not act on the origin.
 */
const SHARED_ORIGIN_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads'
const ORIGIN_WIDE = ['set-cookie', 'service-worker-allowed', 'clear-site-data', 'set-cookie2']
/** A reason phrase Node will write (RFC 9112: HTAB, SP, VCHAR, obs-text). */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/

interface Route {
  id: string
  port: number
  /** Path and query as the sandbox is asked for them. */
  path: string
  /** Prefix the sandbox's paths sit under on our side ('' on its own origin). */
  prefix: string
  /** The path route: one origin for every sandbox. */
  shared: boolean
  cookie: string
}

interface Target extends Route {
  host: string
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

/** The sandbox's response headers as we pass them on: nothing that reaches past its own origin. */
export function responseHeaders(up: IncomingHttpHeaders, shared: boolean): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ...up }
  if (shared) {
    for (const h of ORIGIN_WIDE) delete out[h]
    out['content-security-policy'] = SHARED_ORIGIN_CSP
    return out
  }
  // on its own host a sandbox may keep host-only cookies, but not set them for a parent domain
  // (other sandboxes' origins) nor overwrite our token cookie
  const kept = (up['set-cookie'] ?? []).filter((c) => {
    const name = c.slice(0, c.indexOf('=')).trim()
    return name !== HOST_COOKIE && !/;\s*domain\s*=/i.test(c)
  })
  if (kept.length) out['set-cookie'] = kept
  else delete out['set-cookie']
  return out
}

export function portProxy(deps: {
  auth: Authenticator
  sandboxes: SandboxService
  log: Logger
  /** Exposed ports are served at `{port}-{id}.{domain}`. */
  domain: string
  /** Serve `/s/{id}/{port}/` on the API's origin too. */
  pathRoute: boolean
}) {
  const hostRoute = new RegExp(`^(\\d{1,5})-([a-z0-9-]{1,64})\\.${deps.domain.replace(/\./g, '\\.')}(?::\\d+)?$`, 'i')

  /** Which sandbox port a request is for; null: not an exposed-port request. */
  function route(req: IncomingMessage): Route | null {
    const onHost = hostRoute.exec(req.headers.host ?? '')
    if (onHost) {
      const url = req.url?.startsWith('/') ? req.url : '/'
      return {
        id: (onHost[2] as string).toLowerCase(),
        port: Number(onHost[1]),
        path: url,
        prefix: '',
        shared: false,
        cookie: HOST_COOKIE,
      }
    }
    if (!deps.pathRoute || !req.url?.startsWith('/s/')) return null
    const q = req.url.indexOf('?')
    const m = PATH.exec(q < 0 ? req.url : req.url.slice(0, q))
    if (!m) return null
    const id = m[1] as string
    const port = Number(m[2])
    return {
      id,
      port,
      path: `${m[3] ?? '/'}${q < 0 ? '' : req.url.slice(q)}`,
      prefix: `/s/${id}/${port}`,
      shared: true,
      cookie: pathCookie(id),
    }
  }

  /** Authenticates and locates the port. */
  async function target(req: IncomingMessage, r: Route): Promise<Target> {
    if (r.port < 1 || r.port > 65535) throw new AppError('VALIDATION_FAILED', `port ${r.port} is not a TCP port`)
    const url = new URL(r.path, 'http://x')
    const headers = { ...req.headers }
    const jar = cookies(headers.cookie)
    const queryToken = url.searchParams.get(TOKEN_PARAM)
    const token = (headers['x-forkbox-access-token'] as string | undefined) || queryToken || jar.get(r.cookie)
    const principal = deps.auth.principal(apiKeyIn(headers))
    let credential: { owner: string } | { accessToken: string }
    if (principal) credential = { owner: principal.keyId }
    else if (token) credential = { accessToken: token }
    else throw new AppError('UNAUTHENTICATED', 'an API key or the sandbox access token is required')
    const { host, done } = await deps.sandboxes.portTarget(credential, r.id, r.port)
    if (principal && /^Bearer\s/i.test(headers.authorization ?? '')) delete headers.authorization
    delete headers['x-api-key']
    delete headers['x-forkbox-access-token']
    if (jar.has(r.cookie)) {
      jar.delete(r.cookie)
      if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
      else delete headers.cookie
    }
    url.searchParams.delete(TOKEN_PARAM)
    if (r.prefix) headers['x-forwarded-prefix'] = r.prefix
    headers['x-forwarded-host'] = req.headers.host ?? ''
    headers['x-forwarded-proto'] = 'http'
    return {
      ...r,
      host,
      path: `${url.pathname}${url.search}`,
      headers,
      setCookie:
        queryToken && credential && 'accessToken' in credential
          ? `${r.cookie}=${queryToken}; Path=${r.prefix || ''}/; HttpOnly; SameSite=Lax`
          : undefined,
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
    const r = route(req)
    if (!r) return false
    const reply = (err: unknown) => {
      if (res.headersSent) return res.destroy()
      const f = fail(err)
      res.writeHead(f.status, { 'content-type': 'application/json' }).end(f.body)
    }
    target(req, r)
      .then((t) => {
        const upstream = request(
          { host: t.host, port: t.port, method: req.method, path: t.path, headers: t.headers },
          (up) => {
            const headers = responseHeaders(up.headers, t.shared)
            if (t.setCookie) headers['set-cookie'] = [...((headers['set-cookie'] as string[]) ?? []), t.setCookie]
            const reason = up.statusMessage && REASON.test(up.statusMessage) ? up.statusMessage : undefined
            try {
              res.writeHead(up.statusCode ?? 502, reason, headers)
            } catch (err) {
              // whatever else Node refuses to write: the sandbox's answer is not ours to pass on
              up.destroy()
              return reply(new AppError('PORT_UNREACHABLE', `the sandbox's response was malformed: ${String(err)}`))
            }
            up.on('error', () => res.destroy())
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
    const r = route(req)
    if (!r) return false
    const refuse = (err: unknown) => {
      const f = fail(err)
      socket.end(
        `HTTP/1.1 ${f.status} Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(f.body)}\r\nConnection: close\r\n\r\n${f.body}`,
      )
    }
    socket.on('error', () => {})
    target(req, r)
      .then((t) => {
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
