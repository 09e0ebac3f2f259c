// process.Process/CloseStdin: closes a command's stdin (the clients' closeStdin, envd ≥ 0.5.2).
import { sandboxUnary } from '../connect.ts'
import { CloseStdinRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'
import { selectedPid } from './selected-pid.ts'

export function register(app: E2bApp): void {
  app.post(
    '/process.Process/CloseStdin',
    sandboxUnary(CloseStdinRequest, async (call, req) => {
      await call.services.exec.stdin(call.owner, call.sandboxId, selectedPid(req), Buffer.alloc(0), true)
      return {}
    }),
  )
}
