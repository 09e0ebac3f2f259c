// Who an E2B call is from, as the route group's credentials (http/credentials.ts) found it: the
// control plane takes the API key (`X-API-KEY`); envd and interpreter calls carry a per-sandbox
// access token instead (the clients send no API key there). A call about a sandbox is refused
// unless the credential belongs to that sandbox's owner.
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../http/env.ts'
import { admitCall } from '../http/tenancy.ts'
import { envdToken } from './envd-token.ts'

/** The key id behind the `X-API-KEY` of a control-plane call. */
export function requireApiKey(c: Context<AppEnv>): string {
  const who = c.var.caller
  if (who?.kind !== 'key') throw new AppError('UNAUTHENTICATED', 'an API key is required (X-API-Key header)')
  return who.principal.keyId
}

/** A control-plane handler, handed the key id of the call's API key. */
export type KeyedHandler = (c: Context<AppEnv>, owner: string) => Promise<Response>

/** An authenticated control-plane handler (what it throws goes out E2B-shaped: the layer's onError). */
export const withApiKey = (fn: KeyedHandler) => (c: Context<AppEnv>) => fn(c, requireApiKey(c))

/**
 * The envd access token of a sandbox (valid while its owner's key is), handed out to its owner's
 * key whatever its scopes: the token carries the key's scopes as they stand at each call.
 */
export function accessToken(c: Context<AppEnv>, sandboxId: string): string {
  return envdToken(c.var.services, sandboxId)
}

/** The owner of `sandboxId` if the call carries its access token, or its owner's API key. */
export async function requireSandboxAccess(c: Context<AppEnv>, sandboxId: string): Promise<string> {
  const { auth, sandboxes } = c.var.services
  const who = c.var.caller
  const owner = await sandboxes.ownerOf(sandboxId)
  if (who?.kind === 'key') {
    // another key's sandbox is answered as one that does not exist
    if (owner !== who.principal.keyId) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${sandboxId}`)
    return owner
  }
  if (who?.kind !== 'token' || who.purpose !== 'envd')
    throw new AppError('UNAUTHENTICATED', 'an access token is required (X-Access-Token header)')
  const principal = owner ? await auth.tokenPrincipal('envd', sandboxId, owner, who.token) : null
  if (!owner || !principal)
    throw new AppError('UNAUTHENTICATED', `the access token is not valid for sandbox ${sandboxId}`)
  // the token may do what its owner's key may do now: a key made read-only since stops its writes
  await admitCall(c, principal)
  return owner
}
