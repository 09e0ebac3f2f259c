// Signed file URLs: `GET` (read) or `PUT` (write) of one file of one sandbox, by whoever holds the
// URL, until it expires; no key. The URL is `/v1/sandboxes/{id}/files?path=…&expires=…&signature=…`
// (`user` too when one was asked for), made by `POST /v1/sandboxes/{id}/files/url`. Any page may
// use one (the URL is the whole credential: no cookie is involved), so its answers allow any origin.
import { AppError } from '@forkbox/protocol'
import type { Context, MiddlewareHandler } from 'hono'
import type { SignedFile } from './auth.ts'
import type { AppEnv } from './env.ts'

const FILES = /^\/v1\/sandboxes\/([^/]+)\/files$/

function signedRequest(c: Context<AppEnv>): boolean {
  return FILES.test(c.req.path) && c.req.query('signature') !== undefined
}

/** The file URL a request's query and method describe; UNAUTHENTICATED when it cannot be one. */
function describedFile(c: Context<AppEnv>): SignedFile {
  const sandboxId = decodeURIComponent(FILES.exec(c.req.path)?.[1] ?? '')
  const operation = c.req.method === 'GET' ? 'read' : c.req.method === 'PUT' ? 'write' : null
  const path = c.req.query('path')
  const expires = Number(c.req.query('expires'))
  if (!operation || !path || !Number.isSafeInteger(expires))
    throw new AppError('UNAUTHENTICATED', 'a signed file URL is a GET or PUT with path, expires and signature')
  return { sandboxId, operation, path, user: c.req.query('user'), expires }
}

/**
 * The caller of a signed file URL: the sandbox's owner's key as it stands now, for this one request
 * (the signature covers its sandbox, method, path and user), never an admin. Its scopes are the
 * key's current ones: a write URL of a key made read-only since is refused like the key's own write.
 * Null when the request carries no signature.
 */
export async function signedFileCaller(c: Context<AppEnv>) {
  if (!signedRequest(c)) return null
  const url = describedFile(c)
  const { auth, sandboxes } = c.var.services
  const owner = await sandboxes.ownerOf(url.sandboxId)
  const principal = owner ? await auth.verifyFileSignature(url, owner, c.req.query('signature') ?? '') : null
  if (!principal) throw new AppError('UNAUTHENTICATED', 'the signed URL is not valid for this request, or has expired')
  return { kind: 'key' as const, principal: { ...principal, admin: false } }
}

/** CORS for signed file URLs: any origin (the URL is the credential), and the preflight of a PUT. */
export const signedFileCors: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!signedRequest(c)) return next()
  if (c.req.method === 'OPTIONS') {
    return c.body(null, 204, {
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Allow-Methods': 'GET, PUT',
      'Access-Control-Allow-Headers': 'content-type',
      'Access-Control-Max-Age': '600',
    })
  }
  await next()
  // a copy: the Node server's responses may not take header changes once made
  const res = new Response(c.res.body, c.res)
  res.headers.set('Access-Control-Allow-Origin', '*')
  res.headers.set('Access-Control-Expose-Headers', 'X-Request-Id')
  c.res = res
}
