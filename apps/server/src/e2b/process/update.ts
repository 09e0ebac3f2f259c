// process.Process/Update: resizes a terminal.
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { UpdateRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { selectedPid } from './selected-pid.ts'
import { keyOf } from './started.ts'

export function register(app: E2bApp, { processes }: E2bLayer): void {
  app.post(
    '/process.Process/Update',
    sandboxUnary(UpdateRequest, async (call, req) => {
      const pid = selectedPid(req)
      const t = processes.terminals.get(keyOf(call.sandboxId, pid))
      if (!t) throw new AppError('PROCESS_NOT_FOUND', `no terminal ${pid}`)
      const size = req.pty?.size ?? {}
      if (size.cols !== undefined || size.rows !== undefined) t.session.resize(Number(size.cols), Number(size.rows))
      return {}
    }),
  )
}
