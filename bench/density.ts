// Density: N code-interpreter sandboxes, each holding a pandas DataFrame, left idle. Prints the
// host's CPU while they idle (never frozen: the baseline, then frozen), the host memory each
// costs, and the latency of touching each once (exec, then runCode) in random order.
// The never-frozen baseline can be smaller than N (`--baseline M`): 150 unfrozen sandboxes would
// take more CPU than this host has.
//   node --import tsx bench/density.ts [--sandboxes N] [--baseline M] [--idle-seconds S]
import { readFileSync } from 'node:fs'
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

function memAvailable(): number {
  return Number(readFileSync('/proc/meminfo', 'utf8').match(/^MemAvailable:\s+(\d+)/m)?.[1] ?? 0) * 1024
}

const shuffled = <T>(xs: T[]) =>
  xs
    .map((x) => [Math.random(), x] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, x]) => x)

const host = await benchHost('density', 2, { freezeAfterSeconds: FREEZE_AFTER_S, maxSandboxes: COUNT + 10 })
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
    const cpu = await hostCpu(IDLE_S)
    console.error(`${count} idle sandboxes ${label}: host CPU ${cpu.toFixed(1)}% of a core over ${IDLE_S} s`)
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
