// DELETE /templates/{id}: a snapshot (the clients delete them this way) or one of the key's
// templates, by name.
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.delete(
    '/templates/:id',
    withApiKey(async (c, owner) => {
      const id = c.req.param('id') as string
      if (id.startsWith('snap-')) await c.var.services.sandboxes.deleteSnapshot(owner, id)
      else await c.var.services.templates.delete(owner, id)
      return c.body(null, 204)
    }),
  )
}
