// Every sandbox's network: a slot (namespace + veth + address) from a pool made ahead, the host-side
// rules its policy turns into, and the resolver that answers its DNS. A sandbox without internet
// has a slot too, closed to everything: a policy can then change on a running sandbox, and a
// snapshot restores the same way whatever its policy.
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import type { BlockList } from 'node:net'
import type { EgressPolicy } from '@forkbox/protocol'
import {
  addSlotScript,
  baseScript,
  deleteTableScript,
  type FirewallBase,
  policyScript,
  removeSlotStatements,
  resolvedScript,
} from './firewall.ts'
import { ALWAYS_BLOCKED, blockListOf, blockRange, contains, isCidr, numberToIp, PRIVATE_RANGES } from './ipv4.ts'
import { createSlot, destroySlot, hostBlocks, ifaceBytes, listIfaces, listNetns, type SlotAddress } from './netns.ts'
import { NftWriter } from './nft.ts'
import { nameMatches, Resolver, type ResolverPolicy } from './resolver.ts'

/** What a sandbox may reach; rules are CIDRs (`203.0.113.0/24`, a bare address) or names (`pypi.org`, `*.github.com`). */

export const CLOSED: EgressPolicy = { internet: false, allowOut: [], denyOut: [] }

export interface NetworkConfig {
  /** Distinguishes this agent's namespaces, interfaces and table from another agent's on the host. */
  tag: string
  /** IPv4 block the sandboxes' /30s are cut from. */
  subnet: string
  /** Private ranges the operator lets sandboxes reach (when their own policy does). */
  operatorAllowed: string[]
  /** `host:port` DNS servers the resolver forwards to (default: the host's resolv.conf). */
  dnsUpstreams: string[]
  /** Slots kept made ahead. */
  spareSlots: number
}

/** Most addresses learned from DNS per sandbox and kind (allow, deny). */
const MAX_LEARNED = 4096

export function networkNames(tag: string): { table: string; ifacePrefix: string; netnsPrefix: string } {
  const h = createHash('sha256').update(tag).digest('hex').slice(0, 4)
  return { table: `forkbox_${h}`, ifacePrefix: `fx${h}`, netnsPrefix: `fbx-${h}-` }
}

/** A policy's rules sorted once, when it is put in force: blocks go to the firewall, names to the resolver. */
interface SortedRules {
  allowCidrs: string[]
  denyCidrs: string[]
  allowNames: string[]
  denyNames: string[]
}

function sortRules(policy: EgressPolicy): SortedRules {
  return {
    allowCidrs: policy.allowOut.filter(isCidr),
    denyCidrs: policy.denyOut.filter(isCidr),
    allowNames: policy.allowOut.filter((r) => !isCidr(r)),
    denyNames: policy.denyOut.filter((r) => !isCidr(r)),
  }
}

/** What no answer may carry, built once at start: the lists `reachable` checks. */
interface Reach {
  never: BlockList
  private: BlockList
  operator: BlockList
}

export interface Slot extends SlotAddress {
  policy: EgressPolicy
  rules: SortedRules
  /** Addresses the resolver opened (allow) or closed (deny), by the name rule that matched. */
  learned: { allow: Map<string, Set<string>>; deny: Map<string, Set<string>> }
}

export class NetworkManager {
  private readonly names: ReturnType<typeof networkNames>
  private base!: FirewallBase
  private reach!: Reach
  private readonly used = new Map<number, Slot>()
  private readonly byAddress = new Map<string, Slot>()
  private spares: Slot[] = []
  private refilling: Promise<void> | null = null
  private readonly releasing = new Set<Promise<void>>()
  private resolver: Resolver | null = null
  private generation = 1
  private readonly subnetBase: number
  private readonly subnetSize: number
  private closing = false
  private readonly nft: NftWriter

  constructor(
    private readonly config: NetworkConfig,
    private readonly log: (message: string) => void,
  ) {
    this.names = networkNames(config.tag)
    this.nft = new NftWriter({ log })
    const range = blockRange(config.subnet)
    if (!range || range.size < 16)
      throw new Error(`network subnet ${config.subnet} is not an IPv4 block of /28 or larger`)
    this.subnetBase = range.first
    this.subnetSize = range.size / 4
  }

  /** Routing on, the resolver up, the agent's table made anew (empty: re-attached sandboxes re-add theirs). */
  async init(): Promise<void> {
    // the host forwards sandbox traffic; our rules decide which
    writeFileSync('/proc/sys/net/ipv4/ip_forward', '1')
    this.resolver = new Resolver({
      upstreams: this.config.dnsUpstreams,
      policyOf: (address) => this.resolverPolicy(address),
      log: this.log,
    })
    const blocks = await hostBlocks(this.names.ifacePrefix)
    // another forkbox (or anything else) on this block would get our sandboxes' traffic
    const subnet = blockListOf([this.config.subnet])
    const clash = blocks.find((b) => b.endsWith('/32') && contains(subnet, b.slice(0, -3)))
    if (clash)
      throw new Error(
        `network subnet ${this.config.subnet} is in use on this host (${clash}); give this forkbox another (FORKBOX_NETWORK_SUBNET)`,
      )
    const dnsPort = await this.resolver.listen()
    this.base = {
      table: this.names.table,
      ifacePrefix: this.names.ifacePrefix,
      subnet: this.config.subnet,
      hostBlocks: blocks,
      operatorAllowed: this.config.operatorAllowed,
      dnsPort,
    }
    this.reach = {
      never: blockListOf([...ALWAYS_BLOCKED, ...blocks, this.config.subnet]),
      private: blockListOf(PRIVATE_RANGES),
      operator: blockListOf(this.config.operatorAllowed),
    }
    await this.nft.run(baseScript(this.base))
  }

  private address(slot: number): SlotAddress {
    const base = this.subnetBase + slot * 4
    return {
      slot,
      netns: `${this.names.netnsPrefix}${slot}`,
      iface: `${this.names.ifacePrefix}${slot}`,
      hostIp: numberToIp(base + 1),
      sandboxIp: numberToIp(base + 2),
    }
  }

  private newSlot(index: number): Slot {
    return {
      ...this.address(index),
      policy: CLOSED,
      rules: sortRules(CLOSED),
      learned: { allow: new Map(), deny: new Map() },
    }
  }

  private freeIndex(): number {
    const taken = new Set([...this.used.keys(), ...this.spares.map((s) => s.slot)])
    for (let i = 0; i < this.subnetSize; i++) if (!taken.has(i)) return i
    throw new Error(`no free address in ${this.config.subnet}`)
  }

  private async make(index: number): Promise<Slot> {
    const slot = this.newSlot(index)
    this.used.set(index, slot) // reserved while it is made
    try {
      await createSlot(slot)
      await this.nft.run(addSlotScript(this.base, index, slot.iface, slot.sandboxIp))
    } catch (err) {
      await destroySlot(slot)
      throw err
    } finally {
      this.used.delete(index)
    }
    return slot
  }

  /** A slot for a new sandbox, closed until `apply`: a spare if there is one. */
  async acquire(): Promise<Slot> {
    const slot = this.spares.shift() ?? (await this.make(this.freeIndex()))
    this.used.set(slot.slot, slot)
    this.byAddress.set(slot.sandboxIp, slot)
    this.refill()
    return slot
  }

  private refill(): void {
    if (this.refilling || this.closing) return
    this.refilling = (async () => {
      while (!this.closing && this.spares.length < this.config.spareSlots) {
        try {
          this.spares.push(await this.make(this.freeIndex()))
        } catch (err) {
          this.log(`network: cannot make a spare slot: ${String(err)}`)
          return
        }
      }
    })().finally(() => {
      this.refilling = null
    })
  }

  /** Makes the spare slots now (start-up, so the first creates find them). */
  async prepare(): Promise<void> {
    this.refill()
    await this.refilling
  }

  /** Puts `policy` in force for the slot's sandbox (names open as the sandbox resolves them). */
  async apply(slot: Slot, policy: EgressPolicy): Promise<void> {
    // closed stays closed whatever dormant lists it carries: the rules would be the same (a
    // create without network, the common case, costs no nft transaction)
    if (!policy.internet && !slot.policy.internet && slot.learned.allow.size + slot.learned.deny.size === 0) {
      slot.policy = policy
      slot.rules = sortRules(policy)
      return
    }
    const rules = sortRules(policy)
    // addresses learned for a name rule the new policy still has stay (the sandbox may hold them
    // cached); those of a rule it dropped go with it
    const keep = (learned: Map<string, Set<string>>, rules: string[]) =>
      new Map([...learned].filter(([rule]) => rules.includes(rule)))
    slot.learned = { allow: keep(slot.learned.allow, policy.allowOut), deny: keep(slot.learned.deny, policy.denyOut) }
    const union = (learned: Map<string, Set<string>>) => [...new Set([...learned.values()].flatMap((ips) => [...ips]))]
    const allowResolved = union(slot.learned.allow)
    const denyResolved = union(slot.learned.deny)
    slot.policy = policy
    slot.rules = rules
    await this.nft.run(
      policyScript(this.base, {
        slot: slot.slot,
        iface: slot.iface,
        address: slot.sandboxIp,
        internet: policy.internet,
        allowCidrs: rules.allowCidrs,
        denyCidrs: rules.denyCidrs,
        allowResolved,
        denyResolved,
        allowListed: policy.allowOut.length > 0,
        generation: this.generation++,
      }),
    )
  }

  /** Whether a sandbox may ever reach `ip` (what the resolver lets an answer carry). */
  private reachable(ip: string): boolean {
    if (contains(this.reach.never, ip)) return false
    if (contains(this.reach.private, ip)) return contains(this.reach.operator, ip)
    return true
  }

  private resolverPolicy(address: string): ResolverPolicy | null {
    const slot = this.byAddress.get(address)
    if (!slot) return null
    const { policy, rules } = slot
    return {
      internet: policy.internet,
      ruleFor: (name) => {
        const matching = (names: string[]) => names.find((r) => nameMatches(name, r))
        const deny = matching(rules.denyNames)
        if (deny) return { kind: 'deny', rule: deny }
        const allow = matching(rules.allowNames)
        return allow ? { kind: 'allow', rule: allow } : null
      },
      reachable: (ip) => this.reachable(ip),
      learned: async (kind, rule, ips) => {
        if (slot.policy !== policy) return
        const byRule = slot.learned[kind]
        let total = 0
        for (const set of byRule.values()) total += set.size
        const set = byRule.get(rule) ?? new Set<string>()
        const fresh = ips.filter((ip) => !set.has(ip)).slice(0, Math.max(0, MAX_LEARNED - total))
        if (fresh.length === 0) return
        for (const ip of fresh) set.add(ip)
        byRule.set(rule, set)
        await this.nft.run(resolvedScript(this.base, slot.slot, kind, fresh))
      },
    }
  }

  /** After a restart: takes back the slot a re-attached sandbox runs in, with its policy. */
  async adopt(index: number, policy: EgressPolicy): Promise<Slot> {
    const slot = this.newSlot(index)
    this.used.set(index, slot)
    this.byAddress.set(slot.sandboxIp, slot)
    await this.nft.run(addSlotScript(this.base, index, slot.iface, slot.sandboxIp))
    await this.apply(slot, policy)
    return slot
  }

  /** Removes namespaces and interfaces of this agent that no slot owns (a crashed predecessor's). */
  async sweep(): Promise<string[]> {
    const owned = new Set([...this.used.keys(), ...this.spares.map((s) => s.slot)])
    // a slot left behind shows as its namespace, its host interface, or both
    const left = new Set([
      ...listNetns(this.names.netnsPrefix).map((n) => Number(n.slice(this.names.netnsPrefix.length))),
      ...listIfaces(this.names.ifacePrefix).map((i) => Number(i.slice(this.names.ifacePrefix.length))),
    ])
    const removed: string[] = []
    for (const index of left) {
      if (!Number.isInteger(index) || owned.has(index)) continue
      const a = this.address(index)
      await destroySlot(a)
      removed.push(a.netns)
    }
    return removed
  }

  /** Closes and removes the slot once its sandbox is gone. */
  release(slot: Slot): Promise<void> {
    if (this.used.get(slot.slot) !== slot) return Promise.resolve()
    this.byAddress.delete(slot.sandboxIp)
    const p = (async () => {
      for (const s of removeSlotStatements(this.base, slot.slot, slot.iface, slot.sandboxIp))
        await this.nft.run(`${s}\n`).catch(() => {})
      await destroySlot(slot)
    })().finally(() => {
      this.used.delete(slot.slot)
      this.releasing.delete(p)
    })
    this.releasing.add(p)
    return p
  }

  bytes(slot: Slot): { rxBytes: number; txBytes: number } | null {
    return ifaceBytes(slot.iface)
  }

  /** Removes the spares and the table; sandboxes' slots must have been released. */
  async close(): Promise<void> {
    this.closing = true
    await this.refilling
    while (this.releasing.size > 0) await Promise.all([...this.releasing])
    for (const s of this.spares) await destroySlot(s)
    for (const s of this.used.values()) await destroySlot(s)
    this.spares = []
    this.used.clear()
    await this.nft.run(deleteTableScript(this.base)).catch(() => {})
    await this.nft.close()
    this.resolver?.close()
  }
}
