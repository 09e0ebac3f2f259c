// A fleet against one box, in the same run: create → first exec and exec through a control-plane
// replica of a 3-host fleet (Postgres, hosts in their own network namespaces) next to `forkbox
// up`; fork of a live ~100 MB sandbox to another host; the pause a client sees during a live
// migration. Not a test: it asserts nothing.
//   node --import tsx bench/fleet.ts [--iterations N]
import { Sandbox } from '@forkbox/sdk'
import { removeFleet, startFleet } from '../tests/e2e/fleet-harness.ts'
import { benchHost, measure, N, printSummary, report, timed } from './lib.ts'

const CREATES = Math.min(N, 10)
/** `--only create|exec|fork|migrate`: one part. */
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined
const part = (name: string) => only === undefined || only === name
const FORKS = Math.min(N, 8)

const one = await benchHost('one-box', 1)
const fleet = await startFleet({ replicas: 2, agents: 3 })
const viaReplica = { url: fleet.replicas[1]?.url ?? '', apiKey: fleet.apiKey }
const admin = (path: string) =>
  fetch(`${viaReplica.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${fleet.apiKey}` } })

try {
  const createThenExec = (conn: { url: string; apiKey: string }) => async () => {
    const t0 = performance.now()
    const s = await Sandbox.create({ ...conn })
    await s.exec(['true'])
    const ms = performance.now() - t0
    await s.kill()
    return ms
  }
  // pauses let each kill's teardown and the pools' refills finish: steady-state pool hits
  if (part('create')) {
    report('one box: create → first exec (baseline)', await timed(CREATES, createThenExec(one.conn), 3000))
    report('fleet, via a replica: create → first exec', await timed(CREATES, createThenExec(viaReplica), 3000))
  }
  if (part('exec')) {
    const local = await Sandbox.create({ ...one.conn })
    const remote = await Sandbox.create({ ...viaReplica })
    report('one box: exec ["true"] (baseline)', await measure(N, () => local.exec(['true'])))
    report('fleet, via a replica: exec ["true"]', await measure(N, () => remote.exec(['true'])))
    await local.kill()
    await remote.kill()
  }
  if (part('fork') || part('migrate')) {
    // ~100 MB of live memory in a Python process, then forks: beside it vs. on another host
    const big = await Sandbox.create({ ...viaReplica })
    await big.exec(
      'python3 -c "import time; b = bytearray(100 * 1024 * 1024); b[::4096] = b\\"x\\" * (len(b) // 4096); time.sleep(3600)"',
      {
        background: true,
      },
    )
    await new Promise((r) => setTimeout(r, 2000))
    const forkOnce = (spread: boolean) => async () => {
      const t0 = performance.now()
      const [child] = await big.fork({ count: 1, spread })
      const ms = performance.now() - t0
      await child?.kill()
      return ms
    }
    if (part('fork')) {
      report('fleet: fork ×1 of a 100 MB live sandbox, same host (baseline)', await timed(FORKS, forkOnce(false), 1000))
      report('fleet: fork ×1 of a 100 MB live sandbox, to another host', await timed(FORKS, forkOnce(true), 1000))
    }

    // live migration: a client calling all along; its slowest call is the pause it saw
    const pauses: number[] = []
    for (let i = 0; part('migrate') && i < Math.min(N, 3); i++) {
      const sbx = big
      let calls = 0
      let slowest = 0
      let going = true
      const caller = (async () => {
        while (going) {
          const t = performance.now()
          await sbx.exec(['true'])
          calls++
          slowest = Math.max(slowest, performance.now() - t)
        }
      })()
      await new Promise((r) => setTimeout(r, 300))
      const hosts = (await (
        await fetch(`${viaReplica.url}/v1/hosts`, { headers: { authorization: `Bearer ${fleet.apiKey}` } })
      ).json()) as { hosts: { id: string; placed: { sandboxes: number } }[] }
      const from = hosts.hosts.find((h) => h.placed.sandboxes > 0)?.id ?? 'h0'
      await admin(`/v1/hosts/${from}/drain`)
      await new Promise((r) => setTimeout(r, 300))
      going = false
      await caller
      await admin(`/v1/hosts/${from}/uncordon`)
      pauses.push(slowest)
      console.log(`  migration ${i + 1}: ${calls} calls, slowest ${Math.round(slowest)} ms`)
    }
    if (part('migrate')) report('fleet: live migration of a 100 MB sandbox, the pause a calling client saw', pauses)
    await big.kill()
  }
} finally {
  await one.close()
  await fleet.stop()
  removeFleet(fleet)
}
printSummary()
