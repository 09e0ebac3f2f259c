// Where registry traffic runs: in a network namespace of its own with a sandbox's egress rules
// (the internet, never the host, its private networks, loopback or link-local), so an image a
// tenant names, its token realm and its redirects reach only what a sandbox could. Registries the
// operator allow-lists (FORKBOX_REGISTRY_ALLOW) are pulled from the host's own network.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { isIPv4 } from 'node:net'
import { join } from 'node:path'
import { AppError, type EgressPolicy } from '@forkbox/protocol'
import { ALWAYS_BLOCKED, blockListOf, contains, PRIVATE_RANGES } from './ipv4.ts'
import type { Slot } from './manager.ts'

/** What the pull network takes of the agent's network: one slot, opened to the internet. */
export interface PullSlots {
  ready(): Promise<void>
  acquire(): Promise<Slot>
  apply(slot: Slot, policy: EgressPolicy): Promise<void>
  release(slot: Slot): Promise<void>
}

const PULL_EGRESS: EgressPolicy = { internet: true, allowOut: [], denyOut: [] }
/** `ip netns exec NAME` bind-mounts this dir's files over /etc: the namespace's own resolv.conf. */
const NETNS_ETC = '/etc/netns'

/** Whether `registry` (`host[:port]`) is one the operator lists (as `host:port` or `host`). */
export function registryAllowed(registry: string, allow: readonly string[]): boolean {
  const host = registry.replace(/:\d+$/, '')
  return allow.some((r) => r === registry || r === host)
}

/**
 * The refusal of a registry named by an address no pull may reach (loopback, link-local, private,
 * "this network"), or by a loopback name; null when the name is for the pull network to decide.
 */
export function forbiddenRegistry(registry: string): string | null {
  const host = registry.replace(/:\d+$/, '').toLowerCase()
  if (host === 'localhost' || host.endsWith('.localhost')) return 'a loopback name'
  if (!isIPv4(host)) return null
  if (contains(blockListOf(ALWAYS_BLOCKED), host)) return 'a loopback, link-local or reserved address'
  if (contains(blockListOf(PRIVATE_RANGES), host)) return 'a private address'
  return null
}

export class PullNetwork {
  private slot: Promise<Slot> | null = null

  constructor(
    private readonly slots: PullSlots,
    /** Registries pulled from the host's network, as the operator listed them. */
    private readonly allow: readonly string[],
    /** Names of this agent's namespaces start with this (their /etc/netns dirs are swept at start). */
    netnsPrefix: string,
  ) {
    // only the pull network makes /etc/netns dirs of ours: any there now is a crashed agent's
    for (const name of listDirs(NETNS_ETC)) if (name.startsWith(netnsPrefix)) rmEtc(name)
  }

  /**
   * The command that runs `cmd args` for a pull from `registry`: as it is for an allow-listed
   * registry, else inside the pull namespace. REGISTRY_NOT_ALLOWED for a registry named by an
   * address the namespace could never reach (said at once, rather than as a refused connection).
   */
  async command(registry: string, cmd: string, args: string[]): Promise<[string, string[]]> {
    if (registryAllowed(registry, this.allow)) return [cmd, args]
    const why = forbiddenRegistry(registry)
    if (why)
      throw new AppError(
        'REGISTRY_NOT_ALLOWED',
        `registry ${registry} is ${why}: pulls reach only the internet, unless the operator allow-lists the registry (FORKBOX_REGISTRY_ALLOW)`,
        { registry },
      )
    const slot = await this.open()
    return ['ip', ['netns', 'exec', slot.netns, cmd, ...args]]
  }

  private open(): Promise<Slot> {
    if (!this.slot) {
      this.slot = (async () => {
        await this.slots.ready()
        const slot = await this.slots.acquire()
        try {
          await this.slots.apply(slot, PULL_EGRESS)
          // any nameserver will do: the host redirects the namespace's port 53 to the agent's resolver,
          // which answers only with addresses a sandbox may reach
          mkdirSync(join(NETNS_ETC, slot.netns), { recursive: true })
          writeFileSync(join(NETNS_ETC, slot.netns, 'resolv.conf'), `nameserver ${slot.hostIp}\noptions attempts:2\n`)
        } catch (err) {
          rmEtc(slot.netns)
          await this.slots.release(slot)
          throw err
        }
        return slot
      })()
      this.slot.catch(() => {
        this.slot = null
      })
    }
    return this.slot
  }

  /** Gives the namespace back (the agent closes; pulls have ended). */
  async close(): Promise<void> {
    const slot = await this.slot?.catch(() => null)
    this.slot = null
    if (!slot) return
    rmEtc(slot.netns)
    await this.slots.release(slot)
  }
}

function listDirs(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

function rmEtc(netns: string): void {
  rmSync(join(NETNS_ETC, netns), { recursive: true, force: true })
}
