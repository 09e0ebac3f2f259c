import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'

/**
 * Whose sandbox `sandboxId` is, as far as the caller may act on it: an admin acts on any tenant's
 * (to list, inspect and kill what a revoked or runaway key left); anyone else on their own only.
 */
export async function actingOwner(c: Context<AppEnv>, sandboxId: string): Promise<string> {
  const { keyId, admin } = c.var.principal
  return (admin && (await c.var.services.sandboxes.ownerOf(sandboxId))) || keyId
}

export function requireAdmin(c: Context<AppEnv>, what = 'manage keys'): void {
  if (!c.var.principal.admin) throw new AppError('FORBIDDEN', `only an admin key can ${what}`)
}

/** The key a self-service route acts on: `me` is the caller's own; another key needs the admin key. */
export function selfOrAdmin(c: Context<AppEnv>, id: string, what: string): string {
  const { keyId, admin } = c.var.principal
  const target = id === 'me' ? keyId : id
  if (target !== keyId && !admin) throw new AppError('FORBIDDEN', `only an admin key can ${what} other keys`)
  return target
}
