// Time to interactive through the official E2B client (`e2b`, unchanged, pointed at forkbox by env
// only), the sequence this field's public benchmark times: create, a shell probe of ten small
// commands, then `node -v`; sequentially and as a burst of 20 at once. Next to it, in the same
// run: the native SDK's create → first exec, `commands.run('true')` against the native exec of
// the same command, and a raw process start inside gVisor (a loop of /bin/true in the sandbox).
// Not a test.
//   node --import tsx bench/e2b-tti.ts [--iterations N] [--burst B] [--pool P] [--pool-max M] [--pause S] [--template T]
// The pool starts at P per template and grows toward a burst up to M (the server's default 16;
// M = P keeps it fixed); --pause: seconds between the burst rounds (the pool grows meanwhile).
import { Sandbox as Native } from '@forkbox/sdk'
import { Sandbox } from 'e2b'
import { measure, N, pct, printSummary, report, serverProcess, timed } from './lib.ts'

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(`--${name}`) + 1]) || fallback
const BURST = arg('burst', 20)
const POOL = arg('pool', 2)
const POOL_MAX = arg('pool-max', 16)
const PAUSE_S = arg('pause', 5)
const TEMPLATE = process.argv.includes('--template')
  ? (process.argv[process.argv.indexOf('--template') + 1] ?? 'agent')
  : 'agent'
const RUNS = Math.min(N, 20)
/** A probe an agent runs on a new sandbox: who, where, what is there. */
const PROBE = [
  'echo ready',
  'pwd',
  'whoami',
  'uname -sm',
  'cat /etc/os-release | head -1',
  'ls / | wc -l',
  'command -v python3',
  'command -v git',
  'df -h / | tail -1',
  'date +%s',
].join(' && ')

const server = await serverProcess(import.meta.filename, 'e2b-tti', POOL, {
  prebuild: ['base', TEMPLATE],
  poolMax: POOL_MAX,
})
try {
  const res = await fetch(`${server.conn.url}/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.conn.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'e2b-tti', format: 'e2b' }),
  })
  const e2bKey = ((await res.json()) as { key: string }).key
  process.env.E2B_API_KEY = e2bKey
  process.env.E2B_API_URL = server.conn.url
  process.env.E2B_SANDBOX_URL = server.conn.url

  const tti = async () => {
    const t0 = performance.now()
    const sbx = await Sandbox.create(TEMPLATE)
    const probe = await sbx.commands.run(PROBE)
    const node = await sbx.commands.run('node -v')
    const ms = performance.now() - t0
    if (!probe.stdout.startsWith('ready') || !node.stdout.startsWith('v')) throw new Error('the probe failed')
    await sbx.kill()
    return ms
  }
  // a pause between runs lets the pool refill, as between a user's sandboxes
  report(`E2B time to interactive (${TEMPLATE}), sequential`, await timed(RUNS, tti, 1500))
  const native = async () => {
    const t0 = performance.now()
    const sbx = await Native.create({ ...server.conn, template: TEMPLATE })
    await sbx.exec(['true'])
    const ms = performance.now() - t0
    await sbx.kill()
    return ms
  }
  report(`native SDK create → first exec (${TEMPLATE}), sequential`, await timed(RUNS, native, 1500))

  // one sandbox, the per-command costs
  const sbx = await Sandbox.create(TEMPLATE)
  // the same sandbox through the native SDK (a key sees only its own sandboxes)
  const same = await Native.connect(sbx.sandboxId, { ...server.conn, apiKey: e2bKey })
  report("E2B commands.run('true')", await measure(N, () => sbx.commands.run('true')))
  report("native exec('true') (bash -lc, as E2B's)", await measure(N, () => same.exec('true')))
  report("native exec(['true']) (no shell)", await measure(N, () => same.exec(['true'])))
  report("E2B commands.run('node -v')", await measure(N, () => sbx.commands.run('node -v')))
  report('E2B commands.run(the probe)', await measure(N, () => sbx.commands.run(PROBE)))
  // raw: starts by one process inside the sandbox (posix_spawn, as the guest starts a command),
  // each timed to its exit
  const spawned = async (n: number, argv: string[], env: string) => {
    const loop = `import os, time\nts = []\nfor _ in range(${n}):\n  t = time.perf_counter()\n  os.waitpid(os.posix_spawn(${JSON.stringify(argv[0])}, ${JSON.stringify(argv)}, ${env}), 0)\n  ts.append((time.perf_counter() - t) * 1000)\nprint(" ".join(f"{x:.3f}" for x in ts))`
    return (await same.exec(['python3', '-c', loop])).stdout.trim().split(' ').map(Number)
  }
  report('raw in gVisor: posix_spawn of /bin/true, to its exit', await spawned(200, ['/bin/true'], '{}'))
  report(
    'raw in gVisor: posix_spawn of bash -lc true, to its exit',
    await spawned(50, ['/bin/bash', '-lc', 'true'], 'os.environ'),
  )
  await sbx.kill()

  // a burst: BURST sequences at once, each timed from the common start
  const bursts: number[] = []
  for (let round = 0; round < 3; round++) {
    await new Promise((r) => setTimeout(r, PAUSE_S * 1000))
    const t0 = performance.now()
    const done = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const sbx = await Sandbox.create(TEMPLATE)
        await sbx.commands.run(PROBE)
        await sbx.commands.run('node -v')
        const ms = performance.now() - t0
        return { sbx, ms }
      }),
    )
    const xs = done.map((d) => d.ms)
    console.error(`burst ${round + 1}: median ${pct(xs, 50).toFixed(0)} ms, last ${Math.max(...xs).toFixed(0)} ms`)
    bursts.push(...xs)
    await Promise.all(done.map((d) => d.sbx.kill()))
  }
  report(`E2B time to interactive, ${BURST} at once (pool ${POOL}..${POOL_MAX}), each from the start`, bursts)
  printSummary()
} finally {
  await server.close()
}
