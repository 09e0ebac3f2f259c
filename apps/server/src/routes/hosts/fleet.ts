import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { HostService } from '../../fleet/hosts-service.ts'
import type { AppEnv } from '../../http/env.ts'

/** The fleet's host service; a control plane with its own agent (`forkbox up`) has none. */
export function hostsOf(c: Context<AppEnv>): HostService {
  const hosts = c.var.services.hosts
  if (!hosts) throw new AppError('NOT_FOUND', 'this control plane runs its own agent: it has no fleet of hosts')
  return hosts
}

export function bearer(c: Context<AppEnv>): string | null {
  const h = c.req.header('authorization')
  return h?.startsWith('Bearer ') ? h.slice(7) : null
}
