// Network: create → first exec with `internet: true` next to the same create without network (the
// baseline, measured interleaved in this run), a policy change on a running sandbox, and a request
// to an exposed port next to an exec round trip. Not a test: it asserts nothing.
//   node --import tsx bench/network.ts [--iterations N]
import { Sandbox } from '@forkbox/sdk'
import { benchHost, measure, N, printSummary, report } from './lib.ts'

const CREATES = Math.min(N, 12)
const host = await benchHost('net', 2)
const conn = host.conn
try {
  const without: number[] = []
  const withInternet: number[] = []
  for (let i = 0; i < CREATES * 2; i++) {
    const internet = i % 2 === 1
    const t0 = performance.now()
    const s = await Sandbox.create({ ...conn, network: { internet } })
    await s.exec(['true'])
    ;(internet ? withInternet : without).push(performance.now() - t0)
    await s.kill()
    // the pool refills (one restore at a time) between creates: a steady-state pool hit
    await new Promise((r) => setTimeout(r, 3000))
  }
  report('create → first exec, no network (baseline)', without)
  report('create → first exec, internet: true', withInternet)

  const sbx = await Sandbox.create({ ...conn, network: { internet: true, ports: [8000] } })
  let flip = false
  report(
    'updateNetwork (allowOut change, in force on return)',
    await measure(N, () => {
      flip = !flip
      return sbx.updateNetwork({ allowOut: flip ? ['203.0.113.0/24'] : [] })
    }),
  )
  report('exec ["true"] via SDK (baseline)', await measure(N, () => sbx.exec(['true'])))
  await sbx.exec('cd /tmp && setsid python3 -m http.server 8000 > /dev/null 2>&1 < /dev/null &')
  const url = `http://${sbx.getHost(8000)}/`
  for (let i = 0; i < 50 && (await fetch(url, { headers: { 'x-api-key': conn.apiKey } })).status !== 200; i++)
    await new Promise((r) => setTimeout(r, 100))
  report(
    'GET an exposed port (python http.server, via proxy)',
    await measure(N, async () => (await fetch(url, { headers: { 'x-api-key': conn.apiKey } })).text()),
  )
  await sbx.kill()
} finally {
  await host.close()
}
printSummary()
