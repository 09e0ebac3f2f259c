// How a template's image starts in a sandbox: the defaults its processes run under, and its start
// command run until it is ready (by a bake, which captures it running, and by a cold boot alike).
import { AppError, type ProcessExit } from '@forkbox/protocol'
import { RUNTIME_PYTHON } from '../guest/runtime.ts'
import type { ImageDefaults } from '../runtime/oci-spec.ts'
import type { LiveSandbox } from '../sandboxes/live-sandbox.ts'
import type { TemplateDefinition } from './definition.ts'

const READY_TIMEOUT_MS = 120_000

/** What a user's image sets for its sandboxes (none for the built-in templates). */
export function imageDefaults(def: TemplateDefinition): ImageDefaults | undefined {
  return def.imageDirs ? { user: def.user, workdir: def.workdir } : undefined
}

/** How often a start command that exits before it is ready is started again, in all. */
const START_ATTEMPTS = 3
const START_RETRY_MS = 500
/** How much of a start command's last output an error quotes. */
const START_OUTPUT_TAIL = 2000

/**
 * Starts the image's start command in the background and waits for it to be ready: its ready
 * command exits 0, or else every exposed port accepts a connection (checked on the guest's own
 * Python, which any image has). A bake captures it running; a cold boot runs it the same way.
 *
 * A start command that fails before it is ready (exits non-zero, or is killed) is started again
 * (a few times, as a supervisor would): a server finding a stale pid file of its last life whose
 * pid another process holds now — as after any reboot — exits once and starts the next time.
 * When it keeps failing, the error quotes what it printed instead of waiting out the ready
 * timeout. One that exits 0 has handed over to a daemon (`service x start`): probing goes on.
 */
export async function startImage(def: TemplateDefinition, sbx: LiveSandbox): Promise<void> {
  if (!def.startCmd) return
  const { guest } = sbx
  const probe =
    def.readyCmd ??
    (def.exposedPorts.length > 0
      ? [
          RUNTIME_PYTHON,
          '-S',
          '-c',
          'import socket, sys\nfor p in sys.argv[1:]: socket.create_connection(("127.0.0.1", int(p)), 1).close()',
          ...def.exposedPorts.map(String),
        ]
      : null)
  const deadline = Date.now() + READY_TIMEOUT_MS
  let last = ''
  for (let attempt = 1; ; attempt++) {
    // no timeout: it runs for the sandbox's life
    const { pid } = await guest.startProcess({
      argv: def.startCmd,
      cwd: def.workdir,
      user: def.user,
      timeoutMs: 0,
      maxOutputBytes: 0,
    })
    if (!probe) return
    // its output and its end, while it starts (detached once it is ready)
    let output = ''
    const keep = (chunk: Uint8Array) => {
      output = (output + Buffer.from(chunk).toString('utf8')).slice(-START_OUTPUT_TAIL)
    }
    const attached = new AbortController()
    let exited: ProcessExit | null = null
    const ended = guest
      .attachProcess(pid, { offset: 0 }, { onStdout: keep, onStderr: keep }, attached.signal)
      .then((exit) => {
        exited = exit
      })
      .catch(() => {})
    const failed = (): ProcessExit | null => {
      const e = exited as ProcessExit | null
      return e && (e.exitCode !== 0 || e.signal) ? e : null
    }
    try {
      while (Date.now() < deadline && !failed()) {
        const r = await guest.exec({
          argv: probe,
          user: def.user,
          cwd: def.workdir,
          timeoutMs: 10_000,
          maxOutputBytes: 4096,
        })
        if (r.exitCode === 0 && !failed()) return
        last = `${Buffer.from(r.stdout).toString('utf8')}${Buffer.from(r.stderr).toString('utf8')}`.trim().slice(-500)
        const pause = new Promise((resolve) => setTimeout(resolve, 250))
        await (exited ? pause : Promise.race([ended, pause]))
      }
    } finally {
      attached.abort()
      await ended
    }
    const gone = failed()
    if (!gone) break
    const how = gone.signal ? `was killed by ${gone.signal}` : `exited with code ${gone.exitCode}`
    last = `it ${how} before it was ready${output.trim() ? `: ${output.trim()}` : ''}`
    if (attempt >= START_ATTEMPTS || Date.now() >= deadline)
      throw new AppError(
        'BUILD_STEP_FAILED',
        `the start command ${JSON.stringify(def.startCmd)} did not start (${attempt} tries): ${last}`,
      )
    await new Promise((resolve) => setTimeout(resolve, START_RETRY_MS))
  }
  throw new AppError(
    'BUILD_STEP_FAILED',
    `the start command ${JSON.stringify(def.startCmd)} was not ready within ${READY_TIMEOUT_MS / 1000} s${last ? `: ${last}` : ''}`,
  )
}
