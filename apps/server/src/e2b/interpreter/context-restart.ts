// POST /contexts/{id}/restart: restarts a code context's kernel (its state is lost).
import type { E2bApp } from '../route-module.ts'
import { interpreterHandler } from './handler.ts'

export function register(app: E2bApp): void {
  app.post(
    '/contexts/:id/restart',
    interpreterHandler(async (c, call) => {
      await call.services.code.restartContext(call.owner, call.sandboxId, c.req.param('id') as string)
      return c.body(null, 204)
    }),
  )
}
