// DELETE /contexts/{id}: removes a code context.
import type { E2bApp } from '../route-module.ts'
import { interpreterHandler } from './handler.ts'

export function register(app: E2bApp): void {
  app.delete(
    '/contexts/:id',
    interpreterHandler(async (c, call) => {
      await call.services.code.removeContext(call.owner, call.sandboxId, c.req.param('id') as string)
      return c.body(null, 204)
    }),
  )
}
