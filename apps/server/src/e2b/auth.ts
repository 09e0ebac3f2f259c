// Who is calling: the control plane takes the API key (`X-API-KEY`); envd and interpreter calls
// carry a per-sandbox access token instead (the clients send no API key there).
import { timingSafeEqual } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../http/env.ts'

function apiKeyOwner(c: Context<AppEnv>): string | null {
  const bearer = /^Bearer\s+(\S+)$/i.exec(c.req.header('authorization') ?? '')?.[1]
  const secret = c.req.header('x-api-key') ?? bearer
  if (!secret) return null
  const principal = c.var.services.keys.authenticate(secret)
  if (!principal) throw new AppError('UNAUTHENTICATED', 'unknown or revoked API key')
  return principal.keyId
}

/** The key id behind the `X-API-KEY` of a control-plane call. */
export function requireApiKey(c: Context<AppEnv>): string {
  const owner = apiKeyOwner(c)
  if (!owner) throw new AppError('UNAUTHENTICATED', 'an API key is required (X-API-KEY header)')
  return owner
}

const purpose = (sandboxId: string) => `e2b-envd:${sandboxId}`

/** The envd access token of a sandbox: `<key id>.<HMAC>`, valid while the key is. */
export function accessToken(c: Context<AppEnv>, owner: string, sandboxId: string): string {
  const sig = c.var.services.keys.sign(owner, purpose(sandboxId))
  if (!sig) throw new AppError('UNAUTHENTICATED', 'unknown or revoked API key')
  return `${owner}.${sig}`
}

/** The owner of `sandboxId` if the call carries its access token (or an API key). */
export function requireSandboxAccess(c: Context<AppEnv>, sandboxId: string): string {
  const token = c.req.header('x-access-token') ?? c.req.header('e2b-traffic-access-token')
  if (!token) {
    const owner = apiKeyOwner(c)
    if (owner) return owner
    throw new AppError('UNAUTHENTICATED', 'an access token is required (X-Access-Token header)')
  }
  const dot = token.lastIndexOf('.')
  const owner = token.slice(0, dot)
  const expected = dot > 0 ? c.var.services.keys.sign(owner, purpose(sandboxId)) : null
  const given = Buffer.from(token.slice(dot + 1))
  if (!expected || expected.length !== given.length || !timingSafeEqual(Buffer.from(expected), given))
    throw new AppError('UNAUTHENTICATED', `the access token is not valid for sandbox ${sandboxId}`)
  return owner
}
