// The guest's stdio as two FIFOs in the sandbox's bundle dir, so that the channel outlives the
// agent process: after a crash the next agent opens them again and resyncs (see GuestConnection).
import { execFileSync } from 'node:child_process'
import { closeSync, constants, existsSync, openSync, rmSync } from 'node:fs'
import { Socket } from 'node:net'
import { join } from 'node:path'

export interface GuestPipes {
  /** The agent's write end of the guest's stdin. */
  input: Socket
  /** The agent's read end of the guest's stdout; it ends when the container is gone. */
  output: Socket
}

const paths = (dir: string) => ({ in: join(dir, 'guest.in'), out: join(dir, 'guest.out') })

/**
 * Makes the FIFOs and opens the container's ends, read-write: the container then always holds a
 * reader of its stdout (no EPIPE while no agent reads; writes wait) and a writer of its stdin
 * (no EOF while no agent writes). Close them once runsc has them.
 */
export function createGuestFifos(dir: string): { stdin: number; stdout: number } {
  const p = paths(dir)
  // a previous attempt in the same bundle (a restore that failed, then a cold boot) left its own
  rmSync(p.in, { force: true })
  rmSync(p.out, { force: true })
  execFileSync('mkfifo', ['-m', '600', p.in, p.out])
  return { stdin: openSync(p.in, 'r+'), stdout: openSync(p.out, 'r+') }
}

export function hasGuestFifos(dir: string): boolean {
  const p = paths(dir)
  return existsSync(p.in) && existsSync(p.out)
}

/** The agent's ends of a sandbox's FIFOs. */
export function openGuestPipes(dir: string): GuestPipes {
  const p = paths(dir)
  const out = openSync(p.out, constants.O_RDONLY | constants.O_NONBLOCK)
  let inFd: number
  try {
    inFd = openSync(p.in, constants.O_WRONLY | constants.O_NONBLOCK)
  } catch (err) {
    closeSync(out)
    throw err
  }
  return {
    input: new Socket({ fd: inFd, readable: false, writable: true }),
    output: new Socket({ fd: out, readable: true, writable: false }),
  }
}
