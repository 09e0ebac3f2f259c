// envd's `process.Process` Connect service over forkbox's ExecService: every command runs as a
// forkbox background process (so it has a pid for SendInput/SendSignal/Connect from any
// client), its output streamed back as it comes; terminals are forkbox PTY sessions.
import { AppError, ExecRequest, type PtySession } from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import type { OutputSink } from '../services/exec.ts'
import { deadlineMs, type ServerStream, sandboxUnary, serverStream, streamRequest } from './connect.ts'
import {
  CloseStdinRequest,
  ConnectRequest,
  ListRequest,
  type ProcessConfig,
  SendInputRequest,
  SendSignalRequest,
  StartRequest,
  UnservedRequest,
  UpdateRequest,
} from './messages.ts'
import { type SandboxCall, sandboxCall } from './sandbox-call.ts'

const b64 = (v: string | undefined) => Buffer.from(v ?? '', 'base64')

/** A terminal a Start opened: whoever is attached gets its output; it lives until it exits. */
interface Terminal {
  session: PtySession
  config: ProcessConfig
  listeners: Set<(chunk: Uint8Array) => Promise<void>>
  exited: Promise<{ exitCode: number; signal: string | null }>
}

/**
 * What this app's E2B layer started, by `sandbox:pid` (sandbox ids are unique): configs (for
 * List) and terminals. One per app, so two apps in a process never see each other's.
 */
class Started {
  readonly configs = new Map<string, ProcessConfig>()
  readonly terminals = new Map<string, Terminal>()
}
const keyOf = (sandboxId: string, pid: number) => `${sandboxId}:${pid}`
const MAX_CONFIGS = 10_000

function selectedPid(req: { process: { pid?: number; tag?: string } }): number {
  const sel = req.process
  if (sel.pid !== undefined) return sel.pid
  if (sel.tag !== undefined) throw new AppError('PROCESS_NOT_FOUND', 'processes are selected by pid; tags are not kept')
  throw new AppError('VALIDATION_FAILED', 'process.pid is required')
}

/** How a forkbox process ended, as envd's EndEvent. */
function endEvent(exit: { exitCode: number; signal: string | null }) {
  if (exit.signal) {
    const status = `signal: ${exit.signal === 'SIGKILL' ? 'killed' : exit.signal.toLowerCase()}`
    return { end: { exitCode: -1, exited: false, status, error: status } }
  }
  const status = `exit status ${exit.exitCode}`
  return { end: { exitCode: exit.exitCode, exited: true, status, ...(exit.exitCode !== 0 ? { error: status } : {}) } }
}

const KEEPALIVE = { event: { keepalive: {} } }

const dropped = (bytes: number, more: boolean) =>
  Buffer.from(
    `\n[forkbox: ${more ? 'in all ' : ''}${bytes} bytes of output dropped: the client read slower than the command wrote]\n`,
  ).toString('base64')

/**
 * Output as envd data events. An attached reader holds a fast command back, so it loses nothing;
 * one that connects late, behind forkbox's bounded process log (4 MiB), missed the start: envd has
 * no way to say so, so the loss is said on stderr (once, and the total at the end) rather than kept
 * silent.
 */
function outputSink(out: ServerStream): OutputSink & { flush(): Promise<void> } {
  const stderr = (data: string) => out.send({ event: { data: { stderr: data } } })
  let lost = 0
  let told = 0
  return {
    stdout: (data) => out.send({ event: { data: { stdout: data } } }),
    stderr,
    gap: (bytes) => {
      lost += bytes
      if (told > 0) return
      told = lost
      return stderr(dropped(lost, false))
    },
    flush: async () => {
      if (lost > told) await stderr(dropped(lost, true))
    },
  }
}

/** Streams a background process from `offset` to its end; false if the client left first. */
async function follow(call: SandboxCall, pid: number, offset: number, out: ServerStream): Promise<boolean> {
  await out.send({ event: { start: { pid } } })
  const sink = outputSink(out)
  const exit = await call.services.exec.attach(
    call.owner,
    call.sandboxId,
    pid,
    { offset, encoding: 'base64', output: true },
    sink,
    out.signal,
  )
  if (!exit) return false
  await sink.flush()
  await out.send({ event: endEvent(exit) })
  return true
}

/** Streams a terminal's output to its end (or until the client leaves). */
async function followTerminal(t: Terminal, pid: number, out: ServerStream): Promise<void> {
  const listener = (chunk: Uint8Array) => out.send({ event: { data: { pty: Buffer.from(chunk).toString('base64') } } })
  t.listeners.add(listener)
  try {
    await out.send({ event: { start: { pid } } })
    const gone = new Promise<null>((resolve) => out.signal.addEventListener('abort', () => resolve(null)))
    const exit = await Promise.race([t.exited, gone])
    if (exit) await out.send({ event: endEvent(exit) })
  } finally {
    t.listeners.delete(listener)
  }
}

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
  s.configs.set(key, config)
  // entries of sandboxes nobody lists again go, oldest first, past a bound
  for (const old of s.configs.keys()) {
    if (s.configs.size <= MAX_CONFIGS) break
    s.configs.delete(old)
  }
  // envd ≥ 0.3.0: stdin is closed unless asked for
  if (req.stdin !== true) await call.services.exec.stdin(call.owner, call.sandboxId, pid, Buffer.alloc(0), true)
  // kept for List while it runs on without this client (List forgets it once it is gone)
  if (await follow(call, pid, 0, out)) s.configs.delete(key)
}

async function connect(s: Started, call: SandboxCall, req: z.output<typeof ConnectRequest>, out: ServerStream) {
  const pid = selectedPid(req)
  const t = s.terminals.get(keyOf(call.sandboxId, pid))
  if (t) return followTerminal(t, pid, out)
  const info = (await call.services.exec.list(call.owner, call.sandboxId)).find((p) => p.pid === pid)
  if (!info?.running) throw new AppError('PROCESS_NOT_FOUND', `no running process ${pid}`)
  // like envd, a new connection gets what the process writes from now on
  await follow(call, pid, info.outputBytes, out)
}

async function list(s: Started, call: SandboxCall) {
  const running = (await call.services.exec.list(call.owner, call.sandboxId)).filter((p) => p.running)
  const alive = new Set(running.map((p) => keyOf(call.sandboxId, p.pid)))
  for (const key of s.configs.keys()) if (key.startsWith(`${call.sandboxId}:`) && !alive.has(key)) s.configs.delete(key)
  const processes = running.map((p) => ({
    pid: p.pid,
    config: s.configs.get(keyOf(call.sandboxId, p.pid)) ?? { cmd: p.cmd, args: [], envs: {} },
  }))
  for (const [key, t] of s.terminals)
    if (key.startsWith(`${call.sandboxId}:`)) processes.push({ pid: Number(key.split(':')[1]), config: t.config })
  return { processes }
}

const SIGNALS: Record<string, 'SIGKILL' | 'SIGTERM'> = {
  SIGNAL_SIGKILL: 'SIGKILL',
  SIGNAL_SIGTERM: 'SIGTERM',
  '9': 'SIGKILL',
  '15': 'SIGTERM',
}

async function sendSignal(s: Started, call: SandboxCall, req: z.output<typeof SendSignalRequest>) {
  const pid = selectedPid(req)
  const sig = SIGNALS[String(req.signal)]
  if (!sig) throw new AppError('VALIDATION_FAILED', `unsupported signal ${String(req.signal)}`)
  const t = s.terminals.get(keyOf(call.sandboxId, pid))
  if (t) t.session.kill(sig)
  else {
    // the signal lands before the exit is reaped: a process reported ended had ended already
    const info = await call.services.exec.signal(call.owner, call.sandboxId, pid, sig)
    if (!info.running) throw new AppError('PROCESS_NOT_FOUND', `process ${pid} has already ended`)
  }
  return {}
}

async function sendInput(s: Started, call: SandboxCall, req: z.output<typeof SendInputRequest>) {
  const pid = selectedPid(req)
  const input = req.input
  const t = s.terminals.get(keyOf(call.sandboxId, pid))
  if (input.pty !== undefined) {
    if (!t) throw new AppError('PROCESS_NOT_FOUND', `no terminal ${pid}`)
    t.session.write(b64(input.pty))
  } else if (t) t.session.write(b64(input.stdin))
  else await call.services.exec.stdin(call.owner, call.sandboxId, pid, b64(input.stdin), false)
  return {}
}

async function closeStdin(call: SandboxCall, req: z.output<typeof CloseStdinRequest>) {
  await call.services.exec.stdin(call.owner, call.sandboxId, selectedPid(req), Buffer.alloc(0), true)
  return {}
}

async function update(s: Started, call: SandboxCall, req: z.output<typeof UpdateRequest>) {
  const pid = selectedPid(req)
  const t = s.terminals.get(keyOf(call.sandboxId, pid))
  if (!t) throw new AppError('PROCESS_NOT_FOUND', `no terminal ${pid}`)
  const size = req.pty?.size ?? {}
  if (size.cols !== undefined || size.rows !== undefined) t.session.resize(Number(size.cols), Number(size.rows))
  return {}
}

/** A server-streaming method: the caller is checked before the request message is read. */
function streaming<T extends z.ZodType>(
  schema: T,
  fn: (c: Context<AppEnv>, call: SandboxCall, req: z.output<T>, out: ServerStream) => Promise<void>,
) {
  return (c: Context<AppEnv>) =>
    serverStream(c, KEEPALIVE, async (out) => {
      const call = await sandboxCall(c)
      return fn(c, call, await streamRequest(c, schema), out)
    })
}

export function registerProcess(app: Hono<AppEnv>): void {
  const s = new Started()
  app.post(
    '/process.Process/Start',
    streaming(StartRequest, (c, call, req, out) =>
      req.pty !== undefined ? startTerminal(s, c, call, req, out) : startCommand(s, c, call, req, out),
    ),
  )
  app.post(
    '/process.Process/Connect',
    streaming(ConnectRequest, (_c, call, req, out) => connect(s, call, req, out)),
  )
  app.post(
    '/process.Process/List',
    sandboxUnary(ListRequest, (call) => list(s, call)),
  )
  app.post(
    '/process.Process/SendInput',
    sandboxUnary(SendInputRequest, (call, req) => sendInput(s, call, req)),
  )
  app.post(
    '/process.Process/SendSignal',
    sandboxUnary(SendSignalRequest, (call, req) => sendSignal(s, call, req)),
  )
  app.post('/process.Process/CloseStdin', sandboxUnary(CloseStdinRequest, closeStdin))
  app.post(
    '/process.Process/Update',
    sandboxUnary(UpdateRequest, (call, req) => update(s, call, req)),
  )
  app.post(
    '/process.Process/StreamInput',
    sandboxUnary(UnservedRequest, async () => {
      throw new AppError('NOT_IMPLEMENTED', 'StreamInput is not supported; use SendInput')
    }),
  )
}
