// The sandbox's cgroup, created by us before runsc starts so that it outlives the container:
// after an exit we read why it died (OOM, pids limit) and only then remove it.
import { existsSync, readFileSync, rmdirSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { SandboxErrorReason } from '@forkbox/protocol'

const ROOT = '/sys/fs/cgroup'
const V1_CONTROLLERS = ['memory', 'pids', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'blkio']

export function cgroupV2(): boolean {
  return existsSync(join(ROOT, 'cgroup.controllers'))
}

function dirs(path: string): string[] {
  if (cgroupV2()) return [join(ROOT, path)]
  return V1_CONTROLLERS.filter((c) => existsSync(join(ROOT, c))).map((c) => join(ROOT, c, path))
}

/** Controllers we read after an exit; runsc creates (and removes) the others itself. */
const READ_AFTER_EXIT = ['memory', 'pids']

export function createCgroup(path: string): void {
  const targets = cgroupV2()
    ? [join(ROOT, path)]
    : READ_AFTER_EXIT.filter((c) => existsSync(join(ROOT, c))).map((c) => join(ROOT, c, path))
  for (const d of targets) mkdirSync(d, { recursive: true })
}

function read(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

function counter(text: string, key: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${key} `))
  return line ? Number(line.split(' ')[1]) : 0
}

/** Why the cgroup's processes were stopped, if a limit did it. */
export function limitHit(path: string): SandboxErrorReason | null {
  if (cgroupV2()) {
    const d = join(ROOT, path)
    if (counter(read(join(d, 'memory.events')), 'oom_kill') > 0 || counter(read(join(d, 'memory.events')), 'max') > 0)
      return 'out_of_memory'
    if (counter(read(join(d, 'pids.events')), 'max') > 0) return 'pids_limit'
    return null
  }
  const mem = join(ROOT, 'memory', path)
  if (Number(read(join(mem, 'memory.failcnt')) || 0) > 0 || counter(read(join(mem, 'memory.oom_control')), 'oom_kill') > 0)
    return 'out_of_memory'
  if (counter(read(join(ROOT, 'pids', path, 'pids.events')), 'max') > 0) return 'pids_limit'
  return null
}

export function removeCgroup(path: string): void {
  for (const d of dirs(path)) {
    try {
      rmdirSync(d)
    } catch {
      // already gone, or still has tasks (reconcile retries)
    }
  }
}

/** Child cgroup names under `parent` in any hierarchy. */
export function listCgroups(parent: string): string[] {
  const names = new Set<string>()
  for (const d of dirs(parent)) {
    try {
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) names.add(e.name)
    } catch {
      // hierarchy without our parent
    }
  }
  return [...names]
}
