// `forkbox up` runs the host in a child process and starts it again if it dies: a crash costs
// a few seconds, not the platform (the new host re-attaches every running sandbox). A stop we
// were asked for (SIGINT/SIGTERM) is passed on and ends both.
import { spawn } from 'node:child_process'

/** Marks the child: it runs the host itself instead of supervising. */
export const SUPERVISED_ENV = 'FORKBOX_SUPERVISED'

const RESTART_DELAY_MS = 1000
/** A child that dies this soon after its start counts as failing to start. */
const EARLY_DEATH_MS = 30_000
/** This many early deaths in a row: give up (a broken install, not a crash). */
const MAX_EARLY_DEATHS = 5

export interface SuperviseOptions {
  argv: string[]
  log: (line: string) => void
}

/** Runs `process.execPath argv` until it exits cleanly or we are stopped; returns the exit code. */
export function supervise(opts: SuperviseOptions): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false
    let earlyDeaths = 0
    let child: ReturnType<typeof spawn> | null = null
    const stop = (sig: NodeJS.Signals) => {
      stopping = true
      child?.kill(sig)
    }
    process.on('SIGINT', () => stop('SIGINT'))
    process.on('SIGTERM', () => stop('SIGTERM'))
    const start = () => {
      const startedAt = Date.now()
      // its own process group: a Ctrl-C reaches it once, through us, not twice (twice = stop at once)
      child = spawn(process.execPath, opts.argv, {
        stdio: 'inherit',
        detached: true,
        env: { ...process.env, [SUPERVISED_ENV]: '1' },
      })
      opts.log(`forkbox: host process ${child.pid} started`)
      child.on('exit', (code, signal) => {
        if (stopping || code === 0) return resolve(code ?? (signal ? 128 : 1))
        earlyDeaths = Date.now() - startedAt < EARLY_DEATH_MS ? earlyDeaths + 1 : 0
        if (earlyDeaths >= MAX_EARLY_DEATHS) {
          opts.log(`forkbox: the host died ${earlyDeaths} times right after starting; giving up`)
          return resolve(code ?? 1)
        }
        opts.log(`forkbox: the host process died (${signal ?? `exit ${code}`}); starting it again`)
        setTimeout(() => (stopping ? resolve(1) : start()), RESTART_DELAY_MS)
      })
    }
    start()
  })
}

/**
 * In the host process: `onGone` once the supervisor is gone (the host runs in its own process
 * group, so nothing else would stop it; it would keep the port and its sandboxes with no one to
 * restart or stop it).
 */
export function stopWithSupervisor(onGone: () => void): void {
  const supervisor = process.ppid
  const timer = setInterval(() => {
    if (process.ppid === supervisor) return
    clearInterval(timer)
    onGone()
  }, 1000)
  timer.unref()
}

/**
 * The last resort in the host process: an error nothing caught is logged and the process keeps
 * serving. Every input is validated where it enters, so this should never run; when it does, one
 * request or sandbox is lost rather than every tenant's platform.
 */
export function keepServingOnUncaught(log: (line: string) => void): void {
  process.on('uncaughtException', (err) => {
    log(`forkbox: uncaught error (kept serving): ${err?.stack ?? String(err)}`)
  })
  process.on('unhandledRejection', (err) => {
    log(`forkbox: unhandled rejection (kept serving): ${(err as Error)?.stack ?? String(err)}`)
  })
}
