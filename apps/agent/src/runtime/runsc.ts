// Thin wrappers over the runsc command line, all against forkbox's own --root state dir.
import { execFile } from 'node:child_process'
import { chmodSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface RunscOptions {
  runscPath: string
  stateDir: string
  platform: string
  /** runsc's own debug logs go here, one file per command (off when unset). */
  debugDir?: string
}

/**
 * `rootOverlay` 'none' lets a sandbox write its root dir itself (a build step's host overlay, whose
 * upper dir keeps the step's result); the default keeps every write in the sandbox's memory.
 */
export function runscGlobalArgs(o: RunscOptions, rootOverlay: 'memory' | 'none' = 'memory'): string[] {
  return [
    `--root=${o.stateDir}`,
    `--platform=${o.platform}`,
    // gVisor's own network stack on the veth of the sandbox's namespace; host rules decide what
    // it reaches. Open connections are dropped at a checkpoint (else runsc refuses to take one).
    '--network=sandbox',
    '--net-disconnect-ok',
    rootOverlay === 'none' ? '--overlay2=none' : '--overlay2=root:memory',
    '--cpu-num-from-quota',
    ...(o.debugDir ? ['--debug', `--debug-log=${o.debugDir}/%ID%.%COMMAND%.log`] : []),
  ]
}

/** The containers and their state. Hangs on a frozen sandbox (it asks each one): thaw first. */
export async function runscList(o: RunscOptions): Promise<{ id: string; status: string; pid: number }[]> {
  const { stdout } = await run(o.runscPath, [`--root=${o.stateDir}`, 'list', '--format=json'], {
    timeout: 60_000,
    killSignal: 'SIGKILL',
  })
  const parsed = JSON.parse(stdout.trim() || '[]') as { id: string; status: string; pid: number }[] | null
  return parsed ?? []
}

/** runsc commands that must not hang the caller when a sandbox is wedged. */
const BOUNDED = { timeout: 10_000, killSignal: 'SIGKILL' as const }

export async function runscKill(o: RunscOptions, id: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'kill', '--all', id, 'KILL'], BOUNDED).catch(() => {})
}

/** Sends `signal` to the container's init (the guest daemon) only. */
export async function runscSignal(o: RunscOptions, id: string, signal: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'kill', id, signal], BOUNDED)
}

/**
 * A checkpoint writes the sandbox's memory (~225 MB/s here): even the largest takes well under
 * this; one that does not end by then is wedged, and fails rather than hanging its caller.
 */
const CHECKPOINT_TIMEOUT_MS = 10 * 60_000

export async function runscDelete(o: RunscOptions, id: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'delete', '--force', id], BOUNDED).catch(() => {})
}

/** Checkpoints the container into `imagePath` (uncompressed: restore is CPU-bound); it stops unless `leaveRunning`. */
export async function runscCheckpoint(
  o: RunscOptions,
  id: string,
  imagePath: string,
  opts: { leaveRunning?: boolean } = {},
): Promise<void> {
  const args = [`--root=${o.stateDir}`, 'checkpoint', '--compression=none', `--image-path=${imagePath}`]
  if (opts.leaveRunning) args.push('--leave-running')
  // a sandbox's memory, secrets included: the owner's only
  chmodSync(imagePath, 0o700)
  await run(o.runscPath, [...args, id], { timeout: CHECKPOINT_TIMEOUT_MS, killSignal: 'SIGKILL' })
  for (const f of readdirSync(imagePath)) chmodSync(join(imagePath, f), 0o600)
}

/** Processes (runsc CLIs, sandboxes, gofers) working on this state dir, with the container each
 * works for (from its `--bundle`, whose last path segment is the container id). */
export function runscProcesses(o: RunscOptions): { pid: number; container: string | null }[] {
  const mark = `--root=${o.stateDir}`
  const found: { pid: number; container: string | null }[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')
      if (!args.includes(mark)) continue
      const bundle = args.find((a) => a.startsWith('--bundle='))
      found.push({ pid: Number(name), container: bundle ? (bundle.split('/').at(-1) ?? null) : null })
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** SIGKILLs these processes (runsc's own, found by `runscProcesses`); ones already gone are skipped. */
export function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
}

/** Waits (up to `timeoutMs`) until no process works on this state dir any more. */
export async function waitForRunscProcesses(o: RunscOptions, timeoutMs = 5000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const left = runscProcesses(o).map((p) => p.pid)
    if (left.length === 0 || Date.now() > deadline) return left
    await new Promise((r) => setTimeout(r, 50))
  }
}

/**
 * The command that starts (`run`/`restore`) a sandbox: runsc in a private mount namespace whose
 * /proc/sys shows only kernel, vm and fs. This kernel shows net/core in every network namespace,
 * which runsc takes for the root namespace and refuses to start with a network; `scratch` (an
 * empty dir of the sandbox's) briefly holds a proc mount to bind the three from.
 */
export function startCommand(runscPath: string, args: string[], scratch: string): { file: string; args: string[] } {
  const script = [
    'set -e',
    'p="$1"; shift',
    'mount -t proc proc "$p"',
    'mount -t tmpfs -o size=1m,mode=555 tmpfs /proc/sys',
    'for s in kernel vm fs; do mkdir /proc/sys/$s; mount --rbind "$p/sys/$s" /proc/sys/$s; done',
    'umount -l "$p"',
    'exec "$@"',
  ].join('\n')
  return {
    file: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'private',
      '/bin/sh',
      '-c',
      script,
      'forkbox-start',
      scratch,
      runscPath,
      ...args,
    ],
  }
}
