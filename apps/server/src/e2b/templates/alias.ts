// GET /templates/aliases/{alias}: whether the caller has (or sees) a template of that name.
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.get(
    '/templates/aliases/:alias',
    withApiKey(async (c, owner) =>
      c.json(await c.var.services.e2bTemplates.alias(owner, c.req.param('alias') as string), 200),
    ),
  )
}
