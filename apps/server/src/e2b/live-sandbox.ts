// A sandbox that still exists in E2B's sense: running or paused (a killed one is gone: 404).
import { AppError, type Sandbox } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../http/env.ts'

/** The caller's sandbox `id`, running or paused; SANDBOX_ERRORED or SANDBOX_NOT_FOUND otherwise. */
export async function liveSandbox(c: Context<AppEnv>, owner: string, id: string): Promise<Sandbox> {
  const s = await c.var.services.sandboxes.get(owner, id)
  if (s.state === 'errored')
    throw new AppError('SANDBOX_ERRORED', `sandbox ${id} errored: ${s.errorMessage ?? s.errorReason}`, {
      reason: s.errorReason,
    })
  if (s.state === 'killed') throw new AppError('SANDBOX_NOT_FOUND', `sandbox ${id} was killed`)
  return s
}
