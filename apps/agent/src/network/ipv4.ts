// IPv4 addresses and CIDR blocks as numbers: the arithmetic behind the address pool and the rules.
import { isIPv4 } from 'node:net'

export interface Cidr {
  /** Network address (host bits cleared), as an unsigned 32-bit number. */
  base: number
  prefix: number
}

export function ipToNumber(ip: string): number {
  if (!isIPv4(ip)) throw new Error(`not an IPv4 address: ${ip}`)
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0)
}

export function numberToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
}

function mask(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0
}

/** `a.b.c.d/n` or a bare address (a /32); null when it is neither. */
export function parseCidr(text: string): Cidr | null {
  const [ip, len, ...rest] = text.split('/')
  if (rest.length > 0 || !ip || !isIPv4(ip)) return null
  const prefix = len === undefined ? 32 : Number(len)
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > 32 || (len !== undefined && !/^\d+$/.test(len))) return null
  return { base: (ipToNumber(ip) & mask(prefix)) >>> 0, prefix }
}

export function cidrContains(c: Cidr, ip: number): boolean {
  return (ip & mask(c.prefix)) >>> 0 === c.base
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

/** Whether `ip` is in one of the blocks (as text CIDRs). */
export function inAny(ip: string, blocks: readonly string[]): boolean {
  if (!isIPv4(ip)) return false
  const n = ipToNumber(ip)
  return blocks.some((b) => {
    const c = parseCidr(b)
    return c !== null && cidrContains(c, n)
  })
}
