// process.Process/Connect: attaches to a running command or terminal; like envd, a new connection
// gets what the process writes from now on.
import { AppError } from '@forkbox/protocol'
import { sandboxStream } from '../connect.ts'
import { ConnectRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { follow, followTerminal, KEEPALIVE } from './follow.ts'
import { selectedPid } from './selected-pid.ts'
import { keyOf } from './started.ts'

export function register(app: E2bApp, { processes }: E2bLayer): void {
  app.post(
    '/process.Process/Connect',
    sandboxStream(ConnectRequest, KEEPALIVE, async (_c, call, req, out) => {
      const pid = selectedPid(req)
      const t = processes.terminals.get(keyOf(call.sandboxId, pid))
      if (t) return followTerminal(t, pid, out)
      const info = (await call.services.exec.list(call.owner, call.sandboxId)).find((p) => p.pid === pid)
      if (!info?.running) throw new AppError('PROCESS_NOT_FOUND', `no running process ${pid}`)
      await follow(call, pid, info.outputBytes, out)
    }),
  )
}
