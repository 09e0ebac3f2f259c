// A process's life as envd's stream events: its start, its output as data events, its end.

import type { OutputSink } from '../../services/exec.ts'
import type { ServerStream } from '../connect.ts'
import type { SandboxCall } from '../sandbox-call.ts'
import type { Terminal } from './started.ts'

/** What a process stream sends while nothing else happens. */
export const KEEPALIVE = { event: { keepalive: {} } }

/** How a forkbox process ended, as envd's EndEvent. */
function endEvent(exit: { exitCode: number; signal: string | null }) {
  if (exit.signal) {
    const status = `signal: ${exit.signal === 'SIGKILL' ? 'killed' : exit.signal.toLowerCase()}`
    return { end: { exitCode: -1, exited: false, status, error: status } }
  }
  const status = `exit status ${exit.exitCode}`
  return { end: { exitCode: exit.exitCode, exited: true, status, ...(exit.exitCode !== 0 ? { error: status } : {}) } }
}

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
export async function follow(call: SandboxCall, pid: number, offset: number, out: ServerStream): Promise<boolean> {
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
export async function followTerminal(t: Terminal, pid: number, out: ServerStream): Promise<void> {
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
