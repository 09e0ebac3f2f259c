// The agent's network on its own (no sandbox, no runsc): what a sandbox's slot and its rule changes
// cost, nftables transactions included. Not a test: it asserts nothing.
//   node --import tsx bench/firewall.ts [--iterations N]
import { NetworkManager } from '../apps/agent/src/network/manager.ts'
import { measure, N, printSummary, report } from './lib.ts'

const net = new NetworkManager(
  {
    tag: `forkbox-bench-firewall-${process.pid}`,
    subnet: `10.${210 + (process.pid % 10)}.0.0/16`,
    operatorAllowed: [],
    dnsUpstreams: ['127.0.0.1:53'],
    spareSlots: 0,
  },
  () => {},
)
await net.init()
try {
  const slot = await net.acquire()
  let flip = false
  report(
    'apply: allowOut change on an open slot (one transaction)',
    await measure(N, () => {
      flip = !flip
      return net.apply(slot, { internet: true, allowOut: flip ? ['203.0.113.0/24', 'example.com'] : [], denyOut: [] })
    }),
  )
  await net.release(slot)
  report(
    'slot: acquire → open (internet) → release, no spares',
    await measure(Math.min(N, 30), async () => {
      const s = await net.acquire()
      await net.apply(s, { internet: true, allowOut: ['203.0.113.0/24'], denyOut: ['198.51.100.0/24'] })
      await net.release(s)
    }),
  )
} finally {
  await net.close()
}
printSummary()
