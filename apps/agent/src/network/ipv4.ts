// IPv4 blocks: rule text turned into `net.BlockList`s (built once per policy or start, never per
// DNS answer), the ranges no sandbox reaches, and the address arithmetic of the slot pool.
import { BlockList, isIPv4 } from 'node:net'

/** `a.b.c.d/n` or a bare address (a /32), split; null when it is neither (a name rule, say). */
export function splitCidr(text: string): { address: string; prefix: number } | null {
  const [address, len, ...rest] = text.split('/')
  if (rest.length > 0 || !address || !isIPv4(address)) return null
  if (len === undefined) return { address, prefix: 32 }
  if (!/^\d{1,2}$/.test(len) || Number(len) > 32) return null
  return { address, prefix: Number(len) }
}

export function isCidr(text: string): boolean {
  return splitCidr(text) !== null
}

/** The blocks among `rules` as one list to check addresses against; rules that are not blocks are skipped. */
export function blockListOf(rules: readonly string[]): BlockList {
  const list = new BlockList()
  for (const rule of rules) {
    const c = splitCidr(rule)
    if (c) list.addSubnet(c.address, c.prefix, 'ipv4')
  }
  return list
}

/** Whether `ip` (an IPv4 address) is in `list`; false for anything else. */
export function contains(list: BlockList, ip: string): boolean {
  return isIPv4(ip) && list.check(ip, 'ipv4')
}

export function ipToNumber(ip: string): number {
  if (!isIPv4(ip)) throw new Error(`not an IPv4 address: ${ip}`)
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0)
}

export function numberToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
}

/** First address (host bits cleared) and size of a block: where the slot pool's /30s are cut. */
export function blockRange(cidr: string): { first: number; size: number } | null {
  const c = splitCidr(cidr)
  if (!c) return null
  const size = 2 ** (32 - c.prefix)
  return { first: ipToNumber(c.address) - (ipToNumber(c.address) % size), size }
}

/**
 * Where sandboxes may never connect, whatever their allow-list says: "this network", loopback,
 * link-local (cloud metadata lives at 169.254.169.254), multicast, reserved and broadcast.
 */
export const ALWAYS_BLOCKED = ['0.0.0.0/8', '127.0.0.0/8', '169.254.0.0/16', '224.0.0.0/3']

/** Private and shared ranges: blocked unless the operator allows them (RFC 1918, 6598, 6890, 2544). */
export const PRIVATE_RANGES = [
  '10.0.0.0/8',
  '100.64.0.0/10',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
]

/** Ports Stratum mining pools commonly listen on. */
export const MINING_PORTS = [
  3333, 3334, 3335, 3336, 3357, 4444, 5555, 5556, 5588, 5730, 6099, 6666, 7777, 7778, 9999, 14433, 14444, 45560, 45700,
]
