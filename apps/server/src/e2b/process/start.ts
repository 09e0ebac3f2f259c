// process.Process/Start: a command runs as a forkbox background process (so it has a pid for
// SendInput/SendSignal/Connect from any client), its output streamed back as it comes; with `pty`,
// a terminal, a forkbox PTY session.
import { AppError, ExecRequest, type PtySession } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../../http/env.ts'
import { deadlineMs, type ServerStream, sandboxStream } from '../connect.ts'
import { StartRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import type { SandboxCall } from '../sandbox-call.ts'
import { follow, followTerminal, KEEPALIVE } from './follow.ts'
import { keyOf, type Started, type Terminal } from './started.ts'

type Start = z.output<typeof StartRequest>

async function startTerminal(s: Started, c: Context<AppEnv>, call: SandboxCall, req: Start, out: ServerStream) {
  const config = req.process
  const size = req.pty?.size ?? {}
  let ready: (s: PtySession) => void = () => {}
  const opened = new Promise<PtySession>((resolve) => {
    ready = resolve
  })
  const listeners = new Set<(chunk: Uint8Array) => Promise<void>>()
  const exited = call.services.exec.openPty(
    call.owner,
    call.sandboxId,
    {
      argv: config.cmd ? [config.cmd, ...config.args] : undefined,
      cols: size.cols || 80,
      rows: size.rows || 24,
      env: config.envs,
      cwd: config.cwd,
      user: call.user,
    },
    // the terminal waits for a slow client (flow control); with nobody attached its output is dropped
    async (chunk) => {
      await Promise.all([...listeners].map((l) => l(chunk).catch(() => {})))
    },
    ready,
  )
  // a terminal that cannot start rejects `exited` (no such sandbox, bad cwd, ...)
  const session = await Promise.race([opened, exited.then(() => null)])
  const pid = session ? await Promise.race([session.pid, exited.then(() => 0)]) : 0
  if (!session || !pid) throw new AppError('EXEC_FAILED', 'the terminal exited before it started')
  const t: Terminal = { session, config, listeners, exited }
  const key = keyOf(call.sandboxId, pid)
  s.terminals.set(key, t)
  // envd ends a command at its Start's deadline; a terminal too
  const deadline = deadlineMs(c)
  const timer = deadline ? setTimeout(() => t.session.kill('SIGKILL'), deadline) : undefined
  exited
    .catch(() => ({ exitCode: -1, signal: 'SIGKILL' }))
    .finally(() => {
      clearTimeout(timer)
      s.terminals.delete(key)
    })
  await followTerminal(t, pid, out)
}

async function startCommand(s: Started, c: Context<AppEnv>, call: SandboxCall, req: Start, out: ServerStream) {
  const config = req.process
  if (!config.cmd) throw new AppError('VALIDATION_FAILED', 'process.cmd is required')
  const deadline = deadlineMs(c)
  const parsed = ExecRequest.safeParse({
    cmd: [config.cmd, ...config.args],
    env: config.envs,
    cwd: config.cwd,
    user: call.user,
    // envd ends a command at its Start's deadline (timeoutMs; 0: none)
    timeoutSeconds: deadline ? deadline / 1000 : undefined,
    background: true,
  })
  if (!parsed.success) throw new AppError('VALIDATION_FAILED', parsed.error.issues.map((i) => i.message).join('; '))
  const { pid } = await call.services.exec.start(call.owner, call.sandboxId, parsed.data)
  const key = keyOf(call.sandboxId, pid)
  s.remember(key, config)
  // envd ≥ 0.3.0: stdin is closed unless asked for
  if (req.stdin !== true) await call.services.exec.stdin(call.owner, call.sandboxId, pid, Buffer.alloc(0), true)
  // kept for List while it runs on without this client (List forgets it once it is gone)
  if (await follow(call, pid, 0, out)) s.configs.delete(key)
}

export function register(app: E2bApp, { processes }: E2bLayer): void {
  app.post(
    '/process.Process/Start',
    sandboxStream(StartRequest, KEEPALIVE, (c, call, req, out) =>
      req.pty !== undefined ? startTerminal(processes, c, call, req, out) : startCommand(processes, c, call, req, out),
    ),
  )
}
