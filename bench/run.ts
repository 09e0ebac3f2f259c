// Prints p50/p99 for the foundation's hot paths through the whole stack (SDK → HTTP → agent →
// guest → gVisor), next to baselines measured in the same run. Not a test: it asserts nothing.
//   node --import tsx bench/run.ts [--iterations N]
import { spawn } from 'node:child_process'
import { Sandbox } from '@forkbox/sdk'
import { benchHost, measure, N, printSummary, report, timed } from './lib.ts'

const CREATES = Math.min(N, 10)
const host = await benchHost('main', 1)
const conn = host.conn
const noPoolHost = await benchHost('nopool', 0)
const noPool = noPoolHost.conn
try {
  report(
    'baseline: native spawn("true") on the host',
    await measure(N, () => new Promise((resolve) => spawn('true').on('close', resolve))),
  )

  // create → first exec result, as a user sees it; kills happen outside the timed part
  const createThenExec = (opts: Parameters<typeof Sandbox.create>[0]) => async () => {
    const t0 = performance.now()
    const s = await Sandbox.create({ ...conn, ...opts })
    await s.exec(['true'])
    const ms = performance.now() - t0
    await s.kill()
    return ms
  }
  // the pool refills in the background (one restore at a time): give it time between creates
  // pauses let the previous kill's teardown and the pool's refill finish: a steady-state hit
  report('create → first exec: pool hit', await timed(CREATES, createThenExec({}), 3000))
  report('create → first exec: pool empty (restore)', await timed(CREATES, createThenExec({ ...noPool }), 500))
  // non-default resources are not in the baked snapshot: this is the cold boot baseline
  report(
    'create → first exec: cold boot (baseline)',
    await timed(CREATES, createThenExec({ resources: { diskMB: 1000 } })),
  )

  const sbx = await Sandbox.create({ ...conn })
  // The raw cost of starting /bin/true inside gVisor, from a Python process in the sandbox
  // (posix_spawn, as the guest daemon does), timed inside the sandbox.
  const probe = `
import os, time, json
xs = []
for i in range(${N} + 3):
    t = time.perf_counter(); pid = os.posix_spawn('/bin/true', ['/bin/true'], {}); os.waitpid(pid, 0)
    xs.append((time.perf_counter() - t) * 1000)
print(json.dumps(xs[3:]))`
  const raw = await sbx.exec(['python3', '-c', probe], { timeoutSeconds: 120 })
  report('baseline: spawn /bin/true inside gVisor (raw)', JSON.parse(raw.stdout) as number[])
  const bash = await sbx.exec(
    ['python3', '-c', probe.replace("'/bin/true', ['/bin/true']", "'/bin/bash', ['bash', '-c', 'true']")],
    {
      timeoutSeconds: 120,
    },
  )
  report('baseline: bash -c true inside gVisor (raw)', JSON.parse(bash.stdout) as number[])

  report('exec ["true"] via SDK (whole stack)', await measure(N, () => sbx.exec(['true'])))
  report('exec "true" via SDK (bash -c)', await measure(N, () => sbx.exec('true')))
  report('exec ["true"] as root via SDK', await measure(N, () => sbx.exec(['true'], { user: 'root' })))
  const kb = 'x'.repeat(1024)
  report(
    '1 KB file write + read via SDK',
    await measure(N, async () => {
      await sbx.files.write('/work/bench.txt', kb)
      await sbx.files.read('/work/bench.txt')
    }),
  )
  await sbx.kill()

  // Fork, hibernate and wake of a sandbox whose Python process holds 100 MB of live data.
  const big = await Sandbox.create({ ...conn })
  await big.exec(
    `setsid python3 -c "import time; data = b'x' * (100 * 1024 * 1024); time.sleep(3600)" > /dev/null 2>&1 < /dev/null &`,
  )
  await new Promise((r) => setTimeout(r, 2000))
  const forkOf = (count: number) => async () => {
    const t0 = performance.now()
    const forks = await big.fork({ count })
    const ms = performance.now() - t0
    await Promise.all(forks.map((f) => f.kill()))
    return ms
  }
  report('fork, count 1 (100 MB live data)', await timed(5, forkOf(1), 1500))
  report('fork, count 5 (100 MB live data)', await timed(3, forkOf(5), 3000))
  const hib: number[] = []
  const wake: number[] = []
  for (let i = 0; i < 5; i++) {
    let t0 = performance.now()
    await big.hibernate()
    hib.push(performance.now() - t0)
    t0 = performance.now()
    await big.exec(['true'])
    wake.push(performance.now() - t0)
  }
  report('hibernate (100 MB live data)', hib)
  report('wake → first exec result (100 MB live data)', wake)
  await big.kill()
} finally {
  await host.close()
  await noPoolHost.close()
}
printSummary()
