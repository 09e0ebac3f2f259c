// Thin wrappers over the runsc command line, all against forkbox's own --root state dir.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface RunscOptions {
  runscPath: string
  stateDir: string
  platform: string
}

export function runscGlobalArgs(o: RunscOptions): string[] {
  return [
    `--root=${o.stateDir}`,
    `--platform=${o.platform}`,
    '--network=none',
    '--overlay2=root:memory',
    '--cpu-num-from-quota',
    // an operator's switch: runsc's own debug logs (one file per command), e.g. to time a restore
    ...(process.env.FORKBOX_RUNSC_DEBUG_DIR
      ? ['--debug', `--debug-log=${process.env.FORKBOX_RUNSC_DEBUG_DIR}/%ID%.%COMMAND%.log`]
      : []),
  ]
}

export async function runscList(o: RunscOptions): Promise<{ id: string; status: string; pid: number }[]> {
  const { stdout } = await run(o.runscPath, [`--root=${o.stateDir}`, 'list', '--format=json'])
  const parsed = JSON.parse(stdout.trim() || '[]') as { id: string; status: string; pid: number }[] | null
  return parsed ?? []
}

export async function runscKill(o: RunscOptions, id: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'kill', '--all', id, 'KILL']).catch(() => {})
}

/** Sends `signal` to the container's init (the guest daemon) only. */
export async function runscSignal(o: RunscOptions, id: string, signal: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'kill', id, signal])
}

export async function runscDelete(o: RunscOptions, id: string): Promise<void> {
  await run(o.runscPath, [`--root=${o.stateDir}`, 'delete', '--force', id]).catch(() => {})
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
  await run(o.runscPath, [...args, id])
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

/** Waits (up to `timeoutMs`) until no process works on this state dir any more. */
export async function waitForRunscProcesses(o: RunscOptions, timeoutMs = 5000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const left = runscProcesses(o).map((p) => p.pid)
    if (left.length === 0 || Date.now() > deadline) return left
    await new Promise((r) => setTimeout(r, 50))
  }
}
