// process.Process/SendSignal: SIGKILL or SIGTERM to a command or a terminal.
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { SendSignalRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { selectedPid } from './selected-pid.ts'
import { keyOf } from './started.ts'

const SIGNALS: Record<string, 'SIGKILL' | 'SIGTERM'> = {
  SIGNAL_SIGKILL: 'SIGKILL',
  SIGNAL_SIGTERM: 'SIGTERM',
  '9': 'SIGKILL',
  '15': 'SIGTERM',
}

export function register(app: E2bApp, { processes }: E2bLayer): void {
  app.post(
    '/process.Process/SendSignal',
    sandboxUnary(SendSignalRequest, async (call, req) => {
      const pid = selectedPid(req)
      const sig = SIGNALS[String(req.signal)]
      if (!sig) throw new AppError('VALIDATION_FAILED', `unsupported signal ${String(req.signal)}`)
      const t = processes.terminals.get(keyOf(call.sandboxId, pid))
      if (t) t.session.kill(sig)
      else {
        // the signal lands before the exit is reaped: a process reported ended had ended already
        const info = await call.services.exec.signal(call.owner, call.sandboxId, pid, sig)
        if (!info.running) throw new AppError('PROCESS_NOT_FOUND', `process ${pid} has already ended`)
      }
      return {}
    }),
  )
}
