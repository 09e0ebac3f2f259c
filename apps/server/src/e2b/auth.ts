// Who is calling: the control plane takes the API key (`X-API-KEY`); envd and interpreter calls
// carry a per-sandbox access token instead (the clients send no API key there). Both go through
// the server's one authentication layer (http/auth.ts); a call about a sandbox is refused unless
// the credential belongs to that sandbox's owner.
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import { apiKeyIn } from '../http/auth.ts'
import type { AppEnv } from '../http/env.ts'

const headers = (c: Context<AppEnv>) => (name: string) => c.req.header(name)

/** The key id behind the `X-API-KEY` of a control-plane call. */
export function requireApiKey(c: Context<AppEnv>): string {
  return c.var.services.auth.require(apiKeyIn(headers(c))).keyId
}

/** The envd access token of a sandbox (valid while its owner's key is). */
export function accessToken(c: Context<AppEnv>, sandboxId: string): string {
  return c.var.services.auth.token('envd', sandboxId)
}

/** The owner of `sandboxId` if the call carries its access token, or its owner's API key. */
export function requireSandboxAccess(c: Context<AppEnv>, sandboxId: string): string {
  const { auth, sandboxes } = c.var.services
  const owner = sandboxes.ownerOf(sandboxId)
  const token = c.req.header('x-access-token') ?? c.req.header('e2b-traffic-access-token')
  if (!token) {
    const principal = auth.principal(apiKeyIn(headers(c)))
    if (!principal) throw new AppError('UNAUTHENTICATED', 'an access token is required (X-Access-Token header)')
    // another key's sandbox is answered as one that does not exist
    if (owner !== principal.keyId) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${sandboxId}`)
    return owner
  }
  if (!owner || !auth.verify('envd', sandboxId, owner, token))
    throw new AppError('UNAUTHENTICATED', `the access token is not valid for sandbox ${sandboxId}`)
  return owner
}
