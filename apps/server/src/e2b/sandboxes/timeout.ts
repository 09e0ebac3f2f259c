// POST /sandboxes/{id}/timeout: the sandbox ends `timeout` seconds from now.
import { z } from 'zod'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'
import { TimeoutSeconds } from './timeout-seconds.ts'

const SetTimeout = z.object({ timeout: TimeoutSeconds }).passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/sandboxes/:id/timeout',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      c.var.services.sandboxes.setTimeout(owner, s.id, (await jsonBody(c, SetTimeout)).timeout)
      return c.body(null, 204)
    }),
  )
}
