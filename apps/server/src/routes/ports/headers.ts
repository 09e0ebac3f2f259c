// What crosses the exposed-port proxy in each direction: our credentials never reach the sandbox,
// and what the sandbox answers may not act beyond its own origin (on the path route's shared
// origin: nothing origin-wide at all, and the page is sandboxed).
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'
import { parseCookie, stringifyCookie, stringifySetCookie } from 'cookie'
import { PORT_TOKEN_PARAM } from '../../http/credentials.ts'

export const HOST_COOKIE = 'forkbox_token'
export const pathCookie = (id: string) => `forkbox_token_${id.replace(/[^A-Za-z0-9_]/g, '_')}`

/**
 * On the shared origin of the path route: the page gets an opaque origin (no cookies, storage or
 * same-origin requests of the API's origin or of other sandboxes), and may not act on the origin.
 */
const SHARED_ORIGIN_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads'
const ORIGIN_WIDE = ['set-cookie', 'service-worker-allowed', 'clear-site-data', 'set-cookie2']
/** A reason phrase Node will write (RFC 9112: HTAB, SP, VCHAR, obs-text). */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/

/** Which sandbox port a request is for, and how it is addressed on our side. */
export interface PortRoute {
  id: string
  port: number
  /** Path and query as the sandbox is asked for them (our token still in it). */
  path: string
  /** Prefix the sandbox's paths sit under on our side ('' on its own origin). */
  prefix: string
  /** The path route: one origin for every sandbox. */
  shared: boolean
  /** The cookie the port's token is kept in. */
  cookie: string
}

/**
 * The request's headers and path as the sandbox gets them: without our credentials (the API key
 * if it was one, the token header, our cookie, the token in the query), with X-Forwarded-*.
 */
export function upstreamRequest(
  headers: IncomingHttpHeaders,
  r: PortRoute,
  byKey: boolean,
): { headers: IncomingHttpHeaders; path: string } {
  const out = { ...headers }
  if (byKey && /^Bearer\s/i.test(out.authorization ?? '')) delete out.authorization
  delete out['x-api-key']
  delete out['x-forkbox-access-token']
  // values as they came (not decoded): the sandbox's own cookies pass on unchanged
  const jar = parseCookie(out.cookie ?? '', { decode: (v) => v })
  if (jar[r.cookie] !== undefined) {
    delete jar[r.cookie]
    if (Object.keys(jar).length) out.cookie = stringifyCookie(jar, { encode: (v) => v })
    else delete out.cookie
  }
  const url = new URL(r.path, 'http://x')
  url.searchParams.delete(PORT_TOKEN_PARAM)
  if (r.prefix) out['x-forwarded-prefix'] = r.prefix
  out['x-forwarded-host'] = headers.host ?? ''
  out['x-forwarded-proto'] = 'http'
  return { headers: out, path: `${url.pathname}${url.search}` }
}

/** The cookie that keeps a token given in the query for the browser's further requests. */
export function tokenCookie(r: PortRoute, token: string): string {
  return stringifySetCookie(r.cookie, token, { path: `${r.prefix || ''}/`, httpOnly: true, sameSite: 'lax' })
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

/** The sandbox's reason phrase if Node can write it; otherwise none (Node writes the standard one). */
export function reasonPhrase(message: string | undefined): string | undefined {
  return message && REASON.test(message) ? message : undefined
}
