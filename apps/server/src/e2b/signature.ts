// The E2B clients' signed file URLs (`downloadUrl` / `uploadUrl` of a secured sandbox): envd's
// GET or POST /files with `signature` = "v1_" + base64 SHA-256 of `path:operation:username:token`
// (`:expiration` after it when `signature_expiration` is set), no other credential. The URL names
// its sandbox only by its host name (`49983-{id}.{domain}`, or the E2b-Sandbox-Id header), so it
// works where sandboxes are reached by name; on one shared URL (E2B_SANDBOX_URL) it cannot. Which
// tokens it may be signed with, and so how long one without an expiration lives: envd-token.ts.
import { createHash } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import { sameSecret } from '../http/auth.ts'
import type { AdapterSource, Caller } from '../http/credentials.ts'
import type { AppEnv } from '../http/env.ts'
import { signingTokens } from './envd-token.ts'

/** E2B's signature of a file URL: "v1_" + base64 SHA-256 of its fields and the token (their getSignature). */
function signatureOf(parts: string[]): string {
  return `v1_${createHash('sha256').update(parts.join(':')).digest('base64').replace(/=+$/, '')}`
}

/** The caller a signed envd file URL proves (the envd token it was signed with), or null if it carries none. */
export async function e2bSignedCaller(c: Context<AppEnv>): Promise<Caller | null> {
  const signature = c.req.query('signature')
  if (signature === undefined || c.req.path !== '/files') return null
  const sandboxId = c.var.e2bSandbox?.id ?? c.req.header('e2b-sandbox-id')
  const operation = c.req.method === 'GET' ? 'read' : c.req.method === 'POST' ? 'write' : null
  const refused = (why: string) => new AppError('UNAUTHENTICATED', `the signed URL is not valid: ${why}`)
  if (!sandboxId) throw refused('it names no sandbox (reach the sandbox by its host name)')
  if (!operation) throw refused('it is for GET or POST only')
  const expiration = c.req.query('signature_expiration')
  if (expiration !== undefined && !(Number(expiration) * 1000 >= Date.now())) throw refused('it has expired')
  const { services } = c.var
  const owner = await services.sandboxes.ownerOf(sandboxId)
  if (!owner) throw refused('the signature does not match')
  const { createdAt } = await services.sandboxes.get(owner, sandboxId)
  const time = {
    createdAtMs: Date.parse(createdAt),
    expiresAtSeconds: expiration === undefined ? undefined : Number(expiration),
  }
  const fields = [c.req.query('path') ?? '', operation, c.req.query('username') ?? '']
  const token = signingTokens(services, sandboxId, time).find((t) =>
    sameSecret(signatureOf([...fields, t, ...(expiration === undefined ? [] : [expiration])]), signature),
  )
  if (!token) {
    const cap = services.config.e2bSignedUrlMaxSeconds
    // the one way a URL that once worked stops: say how to make one that works
    if (expiration === undefined && cap !== 'off')
      throw refused(
        `the signature does not match (without signature_expiration a URL works for at most ${cap} s after ` +
          'its access token was handed out: connect to the sandbox again, or pass useSignatureExpiration)',
      )
    throw refused('the signature does not match')
  }
  // the owner's key is checked with the token, as for any envd call (e2b/auth.ts): its scopes now
  return { kind: 'token', purpose: 'envd', token, from: 'query' }
}

/** The signed envd file URL as a credential source of the edge (e2b/index.ts names it for /files). */
export const e2bFileSignature: AdapterSource = { wanted: 'a signed file URL', caller: e2bSignedCaller }
