// POST /sandboxes/{id}/fork: `count` copies of the running sandbox, each with how to reach its envd.
import { MAX_FORK_COUNT } from '@forkbox/protocol'
import { z } from 'zod'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'
import { connection } from '../sandbox-info.ts'
import { TimeoutSeconds } from './timeout-seconds.ts'

const ForkBody = z
  .object({ timeout: TimeoutSeconds.optional(), count: z.number().int().min(1).max(MAX_FORK_COUNT).default(1) })
  .passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/sandboxes/:id/fork',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      const req = await jsonBody(c, ForkBody)
      const forks = await c.var.services.sandboxes.fork(owner, s.id, {
        count: req.count,
        ttlSeconds: req.timeout ?? 300,
      })
      return c.json(
        forks.map((f) => ({ sandbox: connection(c, f) })),
        201,
      )
    }),
  )
}
