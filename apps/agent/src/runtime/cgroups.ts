// The sandbox's cgroup, created by us before runsc starts so that it outlives the container:
// after an exit we read why it died (OOM, pids limit) and only then remove it.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SandboxErrorReason } from '@forkbox/protocol'

const ROOT = '/sys/fs/cgroup'
// every v1 hierarchy runsc creates a cgroup in (name=systemd included)
const V1_CONTROLLERS = [
  'memory',
  'pids',
  'cpu',
  'cpuacct',
  'cpuset',
  'devices',
  'freezer',
  'blkio',
  'net_cls',
  'net_prio',
  'perf_event',
  'hugetlb',
  'rdma',
  'systemd',
]

export function cgroupV2(): boolean {
  return existsSync(join(ROOT, 'cgroup.controllers'))
}

function dirs(path: string): string[] {
  if (cgroupV2()) return [join(ROOT, path)]
  return V1_CONTROLLERS.filter((c) => existsSync(join(ROOT, c))).map((c) => join(ROOT, c, path))
}

/** Controllers we create: memory and pids to read after an exit, cpu to limit only once the
 * sandbox is up. runsc creates (and removes) the others itself. */
const PRECREATED = ['memory', 'pids', 'cpu']

const CPU_PERIOD_US = 100_000

/**
 * Creates the sandbox's memory, pids and cpu cgroups, memory and pids limits set. runsc leaves a
 * cgroup it did not create alone (measured: no limit written), so we write the limits ourselves.
 * The cpu cgroup starts unlimited: see `limitCpu`.
 */
export function createCgroup(path: string, limits: { memoryBytes: number; pids: number }): void {
  if (cgroupV2()) {
    const d = join(ROOT, path)
    mkdirSync(d, { recursive: true })
    writeFileSync(join(d, 'memory.max'), String(limits.memoryBytes))
    writeFileSync(join(d, 'memory.swap.max'), '0')
    writeFileSync(join(d, 'pids.max'), String(limits.pids))
    return
  }
  for (const c of PRECREATED) if (existsSync(join(ROOT, c))) mkdirSync(join(ROOT, c, path), { recursive: true })
  writeFileSync(join(ROOT, 'memory', path, 'memory.limit_in_bytes'), String(limits.memoryBytes))
  try {
    writeFileSync(join(ROOT, 'memory', path, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes))
  } catch {
    // no swap accounting on this kernel
  }
  writeFileSync(join(ROOT, 'pids', path, 'pids.max'), String(limits.pids))
}

/**
 * Caps the cgroup at `vcpus` CPUs (null: no cap). Applied once a sandbox is up, and lifted while
 * it is checkpointed: a restore under the quota spent most of its time throttled (measured: 9 of
 * 10 CFS periods, 720 ms, for one restore). Save and restore are the platform's work, not the
 * sandbox's.
 */
export function limitCpu(path: string, vcpus: number | null): void {
  const quota = vcpus === null ? null : Math.round(vcpus * CPU_PERIOD_US)
  const d = cgroupV2() ? join(ROOT, path) : join(ROOT, 'cpu', path)
  if (!existsSync(d)) return // the sandbox is gone
  if (cgroupV2()) {
    writeFileSync(join(d, 'cpu.max'), `${quota ?? 'max'} ${CPU_PERIOD_US}`)
    return
  }
  writeFileSync(join(d, 'cpu.cfs_period_us'), String(CPU_PERIOD_US))
  writeFileSync(join(d, 'cpu.cfs_quota_us'), String(quota ?? -1))
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
    if (oomKills(path) > 0 || counter(read(join(d, 'memory.events')), 'max') > 0) return 'out_of_memory'
    if (counter(read(join(d, 'pids.events')), 'max') > 0) return 'pids_limit'
    return null
  }
  const mem = join(ROOT, 'memory', path)
  if (Number(read(join(mem, 'memory.failcnt')) || 0) > 0 || oomKills(path) > 0) return 'out_of_memory'
  if (counter(read(join(ROOT, 'pids', path, 'pids.events')), 'max') > 0) return 'pids_limit'
  return null
}

/** How many processes the OOM killer took in the cgroup so far. */
export function oomKills(path: string): number {
  if (cgroupV2()) return counter(read(join(ROOT, path, 'memory.events')), 'oom_kill')
  return counter(read(join(ROOT, 'memory', path, 'memory.oom_control')), 'oom_kill')
}

export function cgroupExists(path: string): boolean {
  return dirs(path).some((d) => existsSync(d))
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

/**
 * Freezes the cgroup's processes (the sandbox's Sentry and gofer: everything in it stops, gVisor's
 * own timekeeping included) or thaws them. v1 freezer.state, v2 cgroup.freeze. False when the
 * cgroup is not there (yet, or any more).
 */
export function setFrozen(path: string, frozen: boolean): boolean {
  try {
    if (cgroupV2()) writeFileSync(join(ROOT, path, 'cgroup.freeze'), frozen ? '1' : '0')
    else writeFileSync(join(ROOT, 'freezer', path, 'freezer.state'), frozen ? 'FROZEN' : 'THAWED')
    return true
  } catch {
    return false
  }
}

/** Thaws every sandbox cgroup under `parent` but those named in `keep` (a crashed agent may have left some frozen). */
export function thawAll(parent: string, keep: ReadonlySet<string> = new Set()): void {
  for (const name of listCgroups(parent)) if (!keep.has(name)) setFrozen(`${parent}/${name}`, false)
}

/** CPU time used (seconds) and memory in use (bytes) by the cgroup; null when it is gone. */
export function readUsage(path: string): { cpuSeconds: number; memoryBytes: number } | null {
  if (cgroupV2()) {
    const d = join(ROOT, path)
    const stat = read(join(d, 'cpu.stat'))
    if (!stat) return null
    return { cpuSeconds: counter(stat, 'usage_usec') / 1e6, memoryBytes: Number(read(join(d, 'memory.current')) || 0) }
  }
  const cpu = read(join(ROOT, 'cpuacct', path, 'cpuacct.usage'))
  const mem = read(join(ROOT, 'memory', path, 'memory.usage_in_bytes'))
  if (!cpu && !mem) return null
  return { cpuSeconds: Number(cpu || 0) / 1e9, memoryBytes: Number(mem || 0) }
}
