// process.Process/SendInput: bytes to a command's stdin or a terminal.
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { SendInputRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { selectedPid } from './selected-pid.ts'
import { keyOf } from './started.ts'

const b64 = (v: string | undefined) => Buffer.from(v ?? '', 'base64')

export function register(app: E2bApp, { processes }: E2bLayer): void {
  app.post(
    '/process.Process/SendInput',
    sandboxUnary(SendInputRequest, async (call, req) => {
      const pid = selectedPid(req)
      const input = req.input
      const t = processes.terminals.get(keyOf(call.sandboxId, pid))
      if (input.pty !== undefined) {
        if (!t) throw new AppError('PROCESS_NOT_FOUND', `no terminal ${pid}`)
        t.session.write(b64(input.pty))
      } else if (t) t.session.write(b64(input.stdin))
      else await call.services.exec.stdin(call.owner, call.sandboxId, pid, b64(input.stdin), false)
      return {}
    }),
  )
}
