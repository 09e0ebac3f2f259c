import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'

export function requireAdmin(c: Context<AppEnv>, what = 'manage keys'): void {
  if (!c.var.principal.admin) throw new AppError('FORBIDDEN', `only an admin key can ${what}`)
}
