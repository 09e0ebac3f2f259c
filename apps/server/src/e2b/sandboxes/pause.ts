// POST /sandboxes/{id}/pause: forkbox's hibernate (memory, processes and disk kept; with
// `memory: false` only the disk); 409 when already paused.
import { z } from 'zod'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'

const PauseBody = z.object({ memory: z.boolean().nullish() }).passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/sandboxes/:id/pause',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      const { memory } = await jsonBody(c, PauseBody)
      await c.var.services.sandboxes.hibernate(owner, s.id, { keepMemory: memory !== false })
      return c.body(null, 204)
    }),
  )
}
