// envd's GET /health: 204 running; 502 for anything else, an unknown sandbox included (what E2B's
// proxy answers, and what `isRunning()` reads).
import { AppError } from '@forkbox/protocol'
import type { E2bApp } from './route-module.ts'
import { sandboxCall } from './sandbox-call.ts'

export function register(app: E2bApp): void {
  app.get('/health', async (c) => {
    const call = await sandboxCall(c)
    try {
      const s = await call.services.sandboxes.get(call.owner, call.sandboxId)
      return s.state === 'running' ? c.body(null, 204) : c.text(`sandbox ${s.id} is ${s.state}`, 502)
    } catch (err) {
      if (err instanceof AppError && err.code === 'SANDBOX_NOT_FOUND') return c.text(err.message, 502)
      throw err
    }
  })
}
