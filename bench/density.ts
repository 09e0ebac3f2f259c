// Density: N code-interpreter sandboxes, each holding a pandas DataFrame, left idle. Prints the
// host's CPU while they idle (never frozen: the baseline, then frozen), the host memory each
// costs, and the latency of touching each once (exec, then runCode) in random order.
// The never-frozen baseline can be smaller than N (`--baseline M`): 150 unfrozen sandboxes would
// take more CPU than this host has.
//   node --import tsx bench/density.ts [--sandboxes N] [--baseline M] [--idle-seconds S]
import { readdirSync, readFileSync } from 'node:fs'
import { Sandbox } from '@forkbox/sdk'
import { benchHost, printSummary, report } from './lib.ts'

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(name) + 1]) || fallback
const COUNT = arg('--sandboxes', 20)
const BASELINE = arg('--baseline', COUNT)
const IDLE_S = arg('--idle-seconds', 30)
const FREEZE_AFTER_S = 3

/** Busy and total jiffies of the whole host (/proc/stat's first line). */
function cpuTimes(): { busy: number; total: number } {
  const [, ...fields] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/)
  const n = fields.map(Number)
  const idle = (n[3] ?? 0) + (n[4] ?? 0)
  const total = n.reduce((a, b) => a + b, 0)
  return { busy: total - idle, total }
}

/** Host CPU use over `seconds`, in % of one core. */
async function hostCpu(seconds: number): Promise<number> {
  const cores = Number(readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm)?.length ?? 1)
  const a = cpuTimes()
  await new Promise((r) => setTimeout(r, seconds * 1000))
  const b = cpuTimes()
  return ((b.busy - a.busy) / (b.total - a.total)) * 100 * cores
}

/** CPU ticks (user + system) of every process now, by pid, with its name ("bench" for this one). */
function processTicks(): Map<number, { name: string; ticks: number }> {
  const out = new Map<number, { name: string; ticks: number }>()
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const ticks = Number(fields[11]) + Number(fields[12])
      out.set(Number(pid), { name: Number(pid) === process.pid ? 'bench (server + client)' : name, ticks })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

/** Who used the host's CPU over `seconds`: % of a core by process name, most first. */
async function cpuByProcess(seconds: number): Promise<[string, number][]> {
  const a = processTicks()
  await new Promise((r) => setTimeout(r, seconds * 1000))
  const b = processTicks()
  const by = new Map<string, number>()
  for (const [pid, { name, ticks }] of b) {
    const used = ticks - (a.get(pid)?.ticks ?? 0)
    if (used > 0) by.set(name, (by.get(name) ?? 0) + used)
  }
  // USER_HZ is 100 on Linux
  return [...by].map(([name, t]) => [name, t / seconds] as [string, number]).sort((x, y) => y[1] - x[1])
}

/** How many of this bench's sandbox cgroups are frozen, of how many (cgroup v1's freezer). */
function frozenCount(): string {
  const dir = `/sys/fs/cgroup/freezer/forkbox-bench-density-${process.pid}`
  try {
    const names = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory())
    const frozen = names.filter((e) => readFileSync(`${dir}/${e.name}/freezer.state`, 'utf8').trim() === 'FROZEN')
    return `${frozen.length}/${names.length} frozen`
  } catch {
    return 'freezer state unknown'
  }
}

function memAvailable(): number {
  return Number(readFileSync('/proc/meminfo', 'utf8').match(/^MemAvailable:\s+(\d+)/m)?.[1] ?? 0) * 1024
}

const shuffled = <T>(xs: T[]) =>
  xs
    .map((x) => [Math.random(), x] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, x]) => x)

// the pool stays at 2: grown by the creates' burst (pools sized to demand), its restores would be
// what the idle window measures
const host = await benchHost('density', 2, { freezeAfterSeconds: FREEZE_AFTER_S, maxSandboxes: COUNT + 10, poolMax: 2 })
try {
  // warm the template (and its pool) before the first measure
  await (await Sandbox.create({ ...host.conn, template: 'code-interpreter' })).kill()
  await new Promise((r) => setTimeout(r, 5000))
  const quiet = await hostCpu(10)
  console.error(`host CPU with no sandboxes (pool frozen): ${quiet.toFixed(1)}% of a core`)

  const fill = async (freeze: boolean, count: number) => {
    const before = memAvailable()
    const boxes: Sandbox[] = []
    for (let i = 0; i < count; i++) {
      const sbx = await Sandbox.create({ ...host.conn, template: 'code-interpreter', ttlSeconds: 3600, freeze })
      await sbx.runCode('import pandas as pd, numpy as np\ndf = pd.DataFrame(np.random.rand(10_000, 8))\ndf.shape')
      boxes.push(sbx)
    }
    return { boxes, bytesEach: (before - memAvailable()) / count }
  }

  for (const freeze of [false, true]) {
    const label = freeze ? 'frozen when idle' : 'never frozen (baseline)'
    const count = freeze ? COUNT : BASELINE
    const { boxes, bytesEach } = await fill(freeze, count)
    console.error(`${count} sandboxes ${label}: host memory ${(bytesEach / 2 ** 20).toFixed(0)} MiB each`)
    // past the freeze window (and the agent's two looks)
    await new Promise((r) => setTimeout(r, (FREEZE_AFTER_S + 5) * 1000))
    const frozenBefore = frozenCount()
    const [cpu, byProcess] = await Promise.all([hostCpu(IDLE_S), cpuByProcess(IDLE_S)])
    console.error(
      `${count} idle sandboxes ${label}: host CPU ${cpu.toFixed(1)}% of a core over ${IDLE_S} s (${frozenBefore} at its start, ${frozenCount()} at its end)`,
    )
    const rest = cpu - byProcess.reduce((a, [, p]) => a + p, 0)
    const top = byProcess.slice(0, 6).map(([n, p]) => `${n} ${p.toFixed(1)}%`)
    console.error(
      `  of which: ${top.join(', ')}; not in a live process (kernel, processes that ended): ${rest.toFixed(1)}%`,
    )
    const execs: number[] = []
    const cells: number[] = []
    for (const sbx of shuffled(boxes)) {
      let t0 = performance.now()
      await sbx.exec(['true'])
      execs.push(performance.now() - t0)
      t0 = performance.now()
      await sbx.runCode('df.shape')
      cells.push(performance.now() - t0)
    }
    report(`touch: exec ["true"], ${count} ${label}`, execs)
    report(`touch: runCode('df.shape') after it, ${count} ${label}`, cells)
    await Promise.all(boxes.map((b) => b.kill()))
  }
} finally {
  await host.close()
}
printSummary()
