// process.Process/List: the sandbox's running commands (with the config they were started with,
// if this app started them) and its terminals.
import { sandboxUnary } from '../connect.ts'
import { ListRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { keyOf } from './started.ts'

export function register(app: E2bApp, { processes: s }: E2bLayer): void {
  app.post(
    '/process.Process/List',
    sandboxUnary(ListRequest, async (call) => {
      const running = (await call.services.exec.list(call.owner, call.sandboxId)).filter((p) => p.running)
      const alive = new Set(running.map((p) => keyOf(call.sandboxId, p.pid)))
      for (const key of s.configs.keys())
        if (key.startsWith(`${call.sandboxId}:`) && !alive.has(key)) s.configs.delete(key)
      const processes = running.map((p) => ({
        pid: p.pid,
        config: s.configs.get(keyOf(call.sandboxId, p.pid)) ?? { cmd: p.cmd, args: [], envs: {} },
      }))
      for (const [key, t] of s.terminals)
        if (key.startsWith(`${call.sandboxId}:`)) processes.push({ pid: Number(key.split(':')[1]), config: t.config })
      return { processes }
    }),
  )
}
