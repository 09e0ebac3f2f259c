// Exposed ports: `{port}-{id}.{domain}` (its own browser origin per sandbox and port) reaches
// port {port} of sandbox {id}, HTTP and WebSocket, for the owner's API key or the sandbox's access
// token (X-Forkbox-Access-Token, or `?forkbox_token=` once, which sets a cookie on that origin, for
// browsers). `/s/{id}/{port}/{path}` on the API's origin serves the same when the operator turns it
// on; there every sandbox shares one origin, so responses are sandboxed (CSP) and stripped of
// headers that act on the whole origin (headers.ts). Only ports the sandbox lists in
// `network.ports` are served. A host matcher first in the route list; http-proxy-3 carries bytes.
import { globalAgent, type IncomingMessage } from 'node:http'
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import { createProxyServer } from 'http-proxy-3'
import { stream as streamUpgrade } from 'http-proxy-3/dist/lib/http-proxy/passes/ws-incoming.js'
import { ENVD_PORT, INTERPRETER_PORT } from '../../e2b/sandbox-call.ts'
import { authenticate, type Caller, type CredentialSource } from '../../http/credentials.ts'
import type { App, AppEnv } from '../../http/env.ts'
import { errorOf, forkboxErrors } from '../../http/errors.ts'
import { checkReadOnly } from '../../http/tenancy.ts'
import { refuseOnSocket, TAKEN_OVER } from '../../http/upgrade.ts'
import {
  HOST_COOKIE,
  type PortRoute,
  pathCookie,
  reasonPhrase,
  responseHeaders,
  tokenCookie,
  upstreamRequest,
} from './headers.ts'

/** The owner's API key, or the sandbox's port token (header, query, or the port's cookie). */
const SOURCES: readonly CredentialSource[] = ['apiKey', 'portToken']
const PATH = /^\/s\/([A-Za-z0-9_-]{1,64})\/(\d{1,5})(\/.*)?$/
/** Ports E2B reserves in every sandbox (envd, the code interpreter): the E2B layer answers them. */
const E2B_DATA_PLANE = new Set([ENVD_PORT, INTERPRETER_PORT])

/** One exchange in flight: what the response handler needs to know about it. */
interface Exchange {
  shared: boolean
  setCookie?: string
  fail: (err: unknown) => void
}

/** The URL as the client sent it (before any decoding). */
function rawUrl(c: Context<AppEnv>, incoming: IncomingMessage): string {
  return incoming.url?.startsWith('/') ? incoming.url : new URL(c.req.url).pathname
}

/** Which sandbox port a request is for; null: not an exposed-port request. */
function portRoute(c: Context<AppEnv>, incoming: IncomingMessage, hostRoute: RegExp): PortRoute | null {
  const onHost = hostRoute.exec(c.req.header('host') ?? '')
  const url = rawUrl(c, incoming)
  if (onHost) {
    const id = (onHost[2] as string).toLowerCase()
    return { id, port: Number(onHost[1]), path: url, prefix: '', shared: false, cookie: HOST_COOKIE }
  }
  if (!c.var.services.config.portsPathRoute || !url.startsWith('/s/')) return null
  const q = url.indexOf('?')
  const m = PATH.exec(q < 0 ? url : url.slice(0, q))
  if (!m) return null
  const id = m[1] as string
  const port = Number(m[2])
  const path = `${m[3] ?? '/'}${q < 0 ? '' : url.slice(q)}`
  return { id, port, path, prefix: `/s/${id}/${port}`, shared: true, cookie: pathCookie(id) }
}

export function register(app: App): void {
  // one per app: its exchanges, and the proxy that answers them
  const exchanges = new WeakMap<IncomingMessage, Exchange>()
  const proxy = createProxyServer({ agent: globalAgent, selfHandleResponse: true, xfwd: false })
  // any upgrade goes through, not only WebSocket's: a sandbox may speak its own protocol (the
  // library's first pass would drop it; its stream pass carries any 101 exchange)
  proxy.before('ws', 'checkMethodAndHeader', (...args: Parameters<typeof streamUpgrade>) => {
    streamUpgrade(...args)
    return true
  })
  proxy.on('error', () => {})
  const upgraded = new WeakSet<IncomingMessage>()
  proxy.on('proxyReqWs', (proxyReq, req) => proxyReq.once('upgrade', () => upgraded.add(req)))
  proxy.on('proxyRes', (up, req, res) => {
    const x = exchanges.get(req)
    if (!x) return up.destroy()
    const headers = responseHeaders(up.headers, x.shared)
    if (x.setCookie) headers['set-cookie'] = [...((headers['set-cookie'] as string[] | undefined) ?? []), x.setCookie]
    try {
      res.writeHead(up.statusCode ?? 502, reasonPhrase(up.statusMessage), headers)
    } catch (err) {
      // whatever else Node refuses to write: the sandbox's answer is not ours to pass on
      up.destroy()
      return x.fail(new AppError('PORT_UNREACHABLE', `the sandbox's response was malformed: ${String(err)}`))
    }
    up.on('error', () => res.destroy())
    up.pipe(res)
  })
  let hostRoute: RegExp | undefined

  app.use('*', async (c, next) => {
    const { incoming, upgrade, outgoing: res } = c.env ?? {}
    // under app.request() there is no Node request to carry: not an exposed-port request
    if (!incoming || !(upgrade || res)) return next()
    const domain = c.var.services.config.sandboxDomain
    hostRoute ??= new RegExp(`^(\\d{1,5})-([a-z0-9-]{1,64})\\.${domain.replace(/\./g, '\\.')}(?::\\d+)?$`, 'i')
    const r = portRoute(c, incoming, hostRoute)
    if (!r) return next()
    if (!r.shared && E2B_DATA_PLANE.has(r.port)) {
      // E2B's envd and code interpreter on the sandbox's own name, as E2B's clients address
      // them with only E2B_DOMAIN set: served by the E2B routes, not proxied into the sandbox
      c.set('e2bSandbox', { id: r.id, port: r.port })
      return next()
    }
    if (r.port < 1 || r.port > 65535) throw new AppError('VALIDATION_FAILED', `port ${r.port} is not a TCP port`)
    c.set('portCookie', r.cookie)
    const who = await authenticate(c, SOURCES)
    const credential = await admitPortCall(c, who, r.id)
    const target = await c.var.services.calls.portTarget(credential, r.id, r.port).catch((err: unknown) => {
      throw unreachable(err)
    })
    const up = upstreamRequest(incoming.headers, r, who.kind === 'key')
    incoming.headers = up.headers
    incoming.url = up.path
    const options = { target: { host: target.host, port: target.port }, agent: target.agent }
    if (upgrade) {
      const { socket, head } = upgrade
      // over once either side is gone (a client that only half-closes counts as gone)
      socket.once('end', target.done)
      socket.once('close', target.done)
      proxy.ws(incoming, socket, head, options, (err) => {
        target.done()
        // before the sandbox switched protocols the client still reads HTTP: tell it why
        if (upgraded.has(incoming) || !socket.writable) return socket.destroy()
        const { status, body } = errorOf(c, unreachable(err), forkboxErrors)
        refuseOnSocket(socket, status, Buffer.from(JSON.stringify(body)), [['content-type', 'application/json']])
      })
      return TAKEN_OVER
    }
    if (res) {
      const fail = (err: unknown) => {
        if (res.headersSent) return res.destroy()
        const { status, body } = errorOf(c, unreachable(err), forkboxErrors)
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
      }
      const setCookie = who.kind === 'token' && who.from === 'query' ? tokenCookie(r, who.token) : undefined
      exchanges.set(incoming, { shared: r.shared, setCookie, fail })
      res.on('close', target.done)
      proxy.web(incoming, res, options, fail)
    }
    return TAKEN_OVER
  })
}

/**
 * The owner's key behind a port call, as it stands now, checked for its scopes: a read-only key,
 * or the port token of one of its sandboxes, only reads (GET, HEAD; no upgrade). A token that is
 * not the sandbox's is answered as for a sandbox that does not exist.
 */
async function admitPortCall(c: Context<AppEnv>, who: Caller, id: string): Promise<{ owner: string }> {
  const { auth, sandboxes } = c.var.services
  const owner = who.kind === 'token' ? await sandboxes.ownerOf(id) : null
  const principal =
    who.kind === 'key' ? who.principal : owner ? await auth.tokenPrincipal(who.purpose, id, owner, who.token) : null
  if (!principal || (who.kind === 'token' && who.purpose !== 'port'))
    throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${id}`)
  checkReadOnly(c, principal)
  return { owner: principal.keyId }
}

/** A failure to reach the sandbox's port, as the error the client gets. */
function unreachable(err: unknown): AppError {
  if (err instanceof AppError) return err
  const why = err instanceof Error ? err.message : String(err)
  return new AppError('PORT_UNREACHABLE', `the sandbox did not answer on that port: ${why}`)
}
