// DELETE /sandboxes/{id}: kills the sandbox.
import { withApiKey } from '../auth.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.delete(
    '/sandboxes/:id',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      await c.var.services.sandboxes.kill(owner, s.id)
      return c.body(null, 204)
    }),
  )
}
