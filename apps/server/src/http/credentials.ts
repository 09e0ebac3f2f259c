// Where a route group takes its credential from, said explicitly (`credentials('apiKey', ...)`),
// and what the credential proves: the one authentication step of every entry point (REST, SSE,
// terminals, exposed ports, E2B REST and Connect). Sources are tried in the order given; an API
// key proves its key at once, a sandbox token is checked against its sandbox where that is known.
import { AppError } from '@forkbox/protocol'
import { parseCookie } from 'cookie'
import type { Context, MiddlewareHandler } from 'hono'
import { apiKeyIn } from './auth.ts'
import type { AppEnv, Caller } from './env.ts'
import { signedFileCaller } from './signed-files.ts'
import { admitCall } from './tenancy.ts'

export type CredentialSource = BuiltInSource | AdapterSource

/**
 * A credential an adapter (the E2B layer's signed envd URLs) brings: the edge tries it like its
 * own and knows nothing else of the adapter.
 */
export interface AdapterSource {
  /** What the refusal says is wanted when no source carried a credential. */
  wanted: string
  caller: (c: Context<AppEnv>) => Promise<Caller | null>
}

type BuiltInSource =
  /** `Authorization: Bearer <key>` or `X-API-Key` (what E2B's control-plane clients send). */
  | 'apiKey'
  /** `?key=`: terminals only, as browsers cannot set headers on a WebSocket. */
  | 'apiKeyQuery'
  /** A sandbox's envd token in `X-Access-Token` / `E2b-Traffic-Access-Token` (E2B's envd clients). */
  | 'accessToken'
  /** A sandbox's port token in `X-Forkbox-Access-Token`, `?forkbox_token=` or the port's cookie. */
  | 'portToken'
  /** A signed file URL (`?signature=`, signed-files.ts): its sandbox's owner, for that one request. */
  | 'fileSignature'

export type { Caller } from './env.ts'

export const PORT_TOKEN_PARAM = 'forkbox_token'

const WANTED: Record<BuiltInSource, string> = {
  apiKey: 'an API key (Authorization: Bearer <key>)',
  apiKeyQuery: 'an API key',
  accessToken: 'an access token (X-Access-Token header)',
  portToken: "the sandbox's access token",
  fileSignature: 'a signed file URL',
}

function wanted(source: CredentialSource): string {
  return typeof source === 'string' ? WANTED[source] : source.wanted
}

async function caller(c: Context<AppEnv>, source: CredentialSource): Promise<Caller | 'refused' | null> {
  if (typeof source !== 'string') return source.caller(c)
  switch (source) {
    case 'apiKey':
    case 'apiKeyQuery': {
      const secret = source === 'apiKey' ? apiKeyIn((name) => c.req.header(name)) : c.req.query('key')
      if (!secret) return null
      const principal = await c.var.services.auth.principal(secret)
      return principal ? { kind: 'key', principal } : 'refused'
    }
    case 'accessToken': {
      const token = c.req.header('x-access-token') ?? c.req.header('e2b-traffic-access-token')
      return token ? { kind: 'token', purpose: 'envd', token, from: 'header' } : null
    }
    case 'fileSignature':
      return signedFileCaller(c)
    case 'portToken': {
      const header = c.req.header('x-forkbox-access-token')
      if (header) return { kind: 'token', purpose: 'port', token: header, from: 'header' }
      const query = c.req.query(PORT_TOKEN_PARAM)
      if (query) return { kind: 'token', purpose: 'port', token: query, from: 'query' }
      const name = c.var.portCookie
      const cookie = name ? parseCookie(c.req.header('cookie') ?? '')[name] : undefined
      return cookie ? { kind: 'token', purpose: 'port', token: cookie, from: 'cookie' } : null
    }
  }
}

/** The caller by the first of `sources` that carries a good credential; UNAUTHENTICATED if none does. */
export async function authenticate(c: Context<AppEnv>, sources: readonly CredentialSource[]): Promise<Caller> {
  let refused = false
  for (const source of sources) {
    const found = await caller(c, source)
    if (found === 'refused') refused = true
    else if (found) return found
  }
  if (refused) throw new AppError('UNAUTHENTICATED', 'unknown or revoked API key')
  const text = sources.map(wanted).join(' or ')
  throw new AppError('UNAUTHENTICATED', `${text} is required`)
}

/** Middleware: authenticates the request from `sources` (`c.var.caller`; `c.var.principal` for a key). */
export function credentials(...sources: CredentialSource[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const who = await authenticate(c, sources)
    c.set('caller', who)
    if (who.kind === 'key') {
      c.set('principal', who.principal)
      await admitCall(c, who.principal)
    }
    await next()
  }
}
