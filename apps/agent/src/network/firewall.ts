// The host-side nftables rules of the agent's sandboxes, written as nft scripts (each one
// transaction). One table per agent; per sandbox a chain, allow/deny sets and map entries.
import { ALWAYS_BLOCKED, MINING_PORTS, PRIVATE_RANGES } from './ipv4.ts'

export interface FirewallNames {
  /** nftables table (family inet). */
  table: string
  /** Host-side interface names of this agent's sandboxes all start with this. */
  ifacePrefix: string
}

export interface FirewallBase extends FirewallNames {
  /** CIDR of the agent's sandbox addresses. */
  subnet: string
  /** The host's own addresses and the networks it is on: never reachable from a sandbox. */
  hostBlocks: string[]
  /** Private ranges the operator lets sandboxes reach. */
  operatorAllowed: string[]
  /** Where port 53 of every sandbox is redirected: the agent's resolver. */
  dnsPort: number
}

/** One sandbox's rules: its interface, address and what it may reach. */
export interface SlotRules {
  slot: number
  iface: string
  address: string
  internet: boolean
  allowCidrs: string[]
  denyCidrs: string[]
  /** Addresses the resolver returned for allowed / denied names. */
  allowResolved: string[]
  denyResolved: string[]
  /** The sandbox has an allow-list (names included, resolved or not): nothing else is reachable. */
  allowListed: boolean
  /** Connection mark of this version of the rules: established flows marked otherwise are checked again. */
  generation: number
}

const elements = (items: readonly (string | number)[]) => (items.length ? ` elements = { ${items.join(', ')} }` : '')

/** Creates (or re-creates, empty of sandboxes) the agent's table. */
export function baseScript(b: FirewallBase): string {
  const sbx = `"${b.ifacePrefix}*"`
  const t = `inet ${b.table}`
  return `table ${t}
delete table ${t}
table ${t} {
  set always { type ipv4_addr; flags interval; auto-merge;${elements([...ALWAYS_BLOCKED, b.subnet, ...b.hostBlocks])} }
  set private { type ipv4_addr; flags interval; auto-merge;${elements(PRIVATE_RANGES)} }
  set operator { type ipv4_addr; flags interval; auto-merge;${elements(b.operatorAllowed)} }
  set mining { type inet_service;${elements(MINING_PORTS)} }
  set addrs { type ifname . ipv4_addr; }
  set dns { type ifname; }
  map egress { type ifname : verdict; }
  chain refuse {
    meta l4proto tcp reject with tcp reset
    reject with icmpx admin-prohibited
  }
  chain guard {
    type filter hook prerouting priority -150; policy accept;
    iifname ${sbx} meta nfproto ipv6 drop
    iifname ${sbx} iifname . ip saddr != @addrs drop
  }
  chain dns_redirect {
    type nat hook prerouting priority dstnat; policy accept;
    iifname ${sbx} meta l4proto { tcp, udp } th dport 53 redirect to :${b.dnsPort}
  }
  chain masquerade_out {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${b.subnet} oifname != ${sbx} masquerade
  }
  chain to_host {
    type filter hook input priority filter; policy accept;
    iifname != ${sbx} udp dport ${b.dnsPort} drop
    iifname != ${sbx} accept
    ct state established,related accept
    iifname @dns udp dport ${b.dnsPort} accept
    goto refuse
  }
  chain through_host {
    type filter hook forward priority filter; policy accept;
    oifname ${sbx} ct state established,related accept
    oifname ${sbx} drop
    iifname ${sbx} jump egress_of
  }
  chain egress_of {
    iifname vmap @egress
    goto refuse
  }
}
`
}

function slotNames(slot: number) {
  return {
    chain: `sbx${slot}`,
    allow: `allow${slot}`,
    deny: `deny${slot}`,
    allowDns: `allowdns${slot}`,
    denyDns: `denydns${slot}`,
  }
}

/** Adds a sandbox's chain and sets (closed to everything); `policyScript` opens it. */
export function addSlotScript(b: FirewallNames, slot: number, iface: string, address: string): string {
  const n = slotNames(slot)
  const t = `inet ${b.table}`
  return `add chain ${t} ${n.chain}
add set ${t} ${n.allow} { type ipv4_addr; flags interval; auto-merge; }
add set ${t} ${n.deny} { type ipv4_addr; flags interval; auto-merge; }
add set ${t} ${n.allowDns} { type ipv4_addr; }
add set ${t} ${n.denyDns} { type ipv4_addr; }
flush chain ${t} ${n.chain}
add rule ${t} ${n.chain} goto refuse
add element ${t} addrs { "${iface}" . ${address} }
add element ${t} egress { "${iface}" : jump ${n.chain} }
add element ${t} dns { "${iface}" }
`
}

/** Rewrites a sandbox's chain and sets to `r`, in one transaction. */
export function policyScript(b: FirewallNames, r: SlotRules): string {
  const n = slotNames(r.slot)
  const t = `inet ${b.table}`
  const lines = [
    `flush chain ${t} ${n.chain}`,
    ...[n.allow, n.deny, n.allowDns, n.denyDns].map((s) => `flush set ${t} ${s}`),
    // every sandbox reaches the resolver (from its slot's start), which answers one without
    // internet REFUSED at once, never asking upstream: a lookup there fails in a millisecond, not
    // after glibc's retries
    `add element ${t} dns { "${r.iface}" }`,
  ]
  const add = (set: string, items: string[]) => {
    if (items.length) lines.push(`add element ${t} ${set} { ${items.join(', ')} }`)
  }
  add(n.allow, r.allowCidrs)
  add(n.deny, r.denyCidrs)
  add(n.allowDns, r.allowResolved)
  add(n.denyDns, r.denyResolved)
  const rule = (body: string) => lines.push(`add rule ${t} ${n.chain} ${body}`)
  const mark = `0x${r.generation.toString(16)}`
  if (r.internet) {
    // a flow this version of the rules let through goes on; one from an older version is checked again
    rule(`ct state established,related ct mark ${mark} accept`)
    rule('ip daddr @always goto refuse')
    rule('ip daddr @private ip daddr != @operator goto refuse')
    rule('tcp dport @mining goto refuse')
    rule('udp dport @mining goto refuse')
    rule(`ip daddr @${n.deny} goto refuse`)
    rule(`ip daddr @${n.denyDns} goto refuse`)
    if (r.allowListed) rule(`ip daddr != @${n.allow} ip daddr != @${n.allowDns} goto refuse`)
    rule(`ct mark set ${mark} accept`)
  }
  rule('goto refuse')
  return `${lines.join('\n')}\n`
}

/** Adds resolved addresses to a sandbox's allow or deny set (no rule change). */
export function resolvedScript(b: FirewallNames, slot: number, kind: 'allow' | 'deny', ips: string[]): string {
  const n = slotNames(slot)
  return `add element inet ${b.table} ${kind === 'allow' ? n.allowDns : n.denyDns} { ${ips.join(', ')} }\n`
}

/** Statements removing a sandbox's chain, sets and map entries (before its interface goes); each
 * may fail alone when a crash left only part of them. */
export function removeSlotStatements(b: FirewallNames, slot: number, iface: string, address: string): string[] {
  const n = slotNames(slot)
  const t = `inet ${b.table}`
  return [
    `delete element ${t} addrs { "${iface}" . ${address} }`,
    `delete element ${t} dns { "${iface}" }`,
    `delete element ${t} egress { "${iface}" }`,
    `delete chain ${t} ${n.chain}`,
    ...[n.allow, n.deny, n.allowDns, n.denyDns].map((s) => `delete set ${t} ${s}`),
  ]
}

export function deleteTableScript(b: FirewallNames): string {
  return `table inet ${b.table}\ndelete table inet ${b.table}\n`
}
