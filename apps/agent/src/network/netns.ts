// A sandbox's network slot: its own network namespace holding one end of a veth pair (eth0, which
// runsc takes into gVisor's stack); the other end stays on the host, where the rules apply.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

export interface SlotAddress {
  slot: number
  netns: string
  iface: string
  hostIp: string
  sandboxIp: string
}

function ip(args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('ip', args, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(' ')}: ${stderr.trim() || err.message}`))
      else resolve(stdout)
    })
    if (input !== undefined) child.stdin?.end(input)
  })
}

/** Makes the namespace and veth of `a`: sandbox side `sandboxIp/30` with a default route via the host side. */
export async function createSlot(a: SlotAddress): Promise<void> {
  await ip(
    ['-batch', '-'],
    [
      `netns add ${a.netns}`,
      `link add ${a.iface} type veth peer name eth0 netns ${a.netns}`,
      `addr add ${a.hostIp}/30 dev ${a.iface}`,
      `link set ${a.iface} up`,
      '',
    ].join('\n'),
  )
  await ip(
    ['-n', a.netns, '-batch', '-'],
    [
      `addr add ${a.sandboxIp}/30 dev eth0`,
      'link set eth0 up',
      'link set lo up',
      `route add default via ${a.hostIp}`,
      '',
    ].join('\n'),
  )
}

/** Removes the namespace (its eth0 and so the pair go with it) and, should it be left, the host end. */
export async function destroySlot(a: Pick<SlotAddress, 'netns' | 'iface'>): Promise<void> {
  await ip(['netns', 'delete', a.netns]).catch(() => {})
  await ip(['link', 'delete', a.iface]).catch(() => {})
}

/** Namespaces named with `prefix` (under /run/netns). */
export function listNetns(prefix: string): string[] {
  try {
    return readdirSync('/run/netns').filter((n) => n.startsWith(prefix))
  } catch {
    return []
  }
}

/** Host interfaces named with `prefix`. */
export function listIfaces(prefix: string): string[] {
  return readdirSync('/sys/class/net').filter((n) => n.startsWith(prefix))
}

/** Bytes through the host end: what it received the sandbox sent, and the other way round. */
export function ifaceBytes(iface: string): { rxBytes: number; txBytes: number } | null {
  try {
    const read = (f: string) => Number(readFileSync(`/sys/class/net/${iface}/statistics/${f}`, 'utf8'))
    return { rxBytes: read('tx_bytes'), txBytes: read('rx_bytes') }
  } catch {
    return null
  }
}

/** The host's own IPv4 addresses and the networks they are on (interfaces not named `skipPrefix`). */
export async function hostBlocks(skipPrefix: string): Promise<string[]> {
  const out = JSON.parse(await ip(['-j', '-4', 'addr', 'show'])) as {
    ifname: string
    addr_info?: { local: string; prefixlen: number }[]
  }[]
  const blocks: string[] = []
  for (const link of out) {
    if (link.ifname.startsWith(skipPrefix)) continue
    for (const a of link.addr_info ?? []) blocks.push(`${a.local}/32`, `${a.local}/${a.prefixlen}`)
  }
  return blocks
}
