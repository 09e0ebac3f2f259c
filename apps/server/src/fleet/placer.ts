// Where new sandboxes go, as this replica sees it: what is placed on each host (the store's
// aggregate, read at most once a second, plus what this replica placed since) and the pooled
// sandboxes it took since each host's last heartbeat; ranked by placement.ts.
import type { HostCapacity } from '@forkbox/protocol'
import type { HostRow, HostStore, Placed } from './hosts-store.ts'
import { type Candidate, rankHosts } from './placement.ts'

const PLACED_CACHE_MS = 1_000

/** What a sandbox holds of its host: its vCPUs and memory limit. */
export function reservationOf(spec: { resources: { vcpus: number; memoryMB: number } }): {
  vcpus: number
  memoryMB: number
} {
  return { vcpus: spec.resources.vcpus, memoryMB: spec.resources.memoryMB }
}

/** Adds a sandbox's reservation to what `placed` says host `host` holds. */
function bump(placed: Map<string, Placed>, host: string, r: { vcpus: number; memoryMB: number }): void {
  const p = placed.get(host) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 }
  placed.set(host, { ...p, sandboxes: p.sandboxes + 1, vcpus: p.vcpus + r.vcpus, memoryMB: p.memoryMB + r.memoryMB })
}

export class Placer {
  private placedCache: { at: number; map: Promise<Map<string, Placed>> } | null = null
  private placedRefresh: Promise<void> | null = null

  constructor(
    private readonly hosts: HostStore,
    /** The hosts that answer heartbeats now. */
    private readonly reachable: () => Promise<HostRow[]>,
  ) {}

  /**
   * What is placed on each host, read from the store at most once a second (an aggregate over
   * every placement: at 100,000 sandboxes, too much for each create) plus what this replica
   * placed since.
   */
  private async placedNow(): Promise<Map<string, Placed>> {
    const now = Date.now()
    if (!this.placedCache) {
      const map = this.hosts.placed()
      map.catch(() => {
        if (this.placedCache?.map === map) this.placedCache = null
      })
      this.placedCache = { at: now, map }
    } else if (now - this.placedCache.at > PLACED_CACHE_MS && !this.placedRefresh) {
      // read again in the background: creates go on with the last figures meanwhile (the read
      // takes a few hundred ms at 100,000 placements)
      const stamp = now
      this.placedRefresh = this.hosts
        .placed()
        .then((map) => {
          this.placedCache = { at: stamp, map: Promise.resolve(map) }
        })
        .catch(() => {})
        .finally(() => {
          this.placedRefresh = null
        })
    }
    return this.placedCache.map
  }

  /** Counts a placement this replica just made until the next read of the store. */
  async reserved(host: string, r: { vcpus: number; memoryMB: number }): Promise<void> {
    const map = await this.placedNow().catch(() => null)
    if (map) bump(map, host, r)
  }

  /** Hosts that can take a sandbox like `spec`, best first (a restore from a snapshot: by load alone). */
  async rank(
    spec: {
      template: string
      snapshot?: string
      resources: { vcpus: number; memoryMB: number }
    },
    opts: { reserveFirst?: boolean } = {},
  ): Promise<string[]> {
    const placed = await this.placedNow()
    const template = spec.snapshot ? undefined : spec.template
    const candidates: Candidate[] = (await this.reachable())
      .filter((r) => r.state === 'ready')
      .map((r) => ({
        id: r.id,
        capacity: this.poolAfterClaims(r, template),
        placed: placed.get(r.id) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 },
      }))
    const ranked = rankHosts(candidates, { ...reservationOf(spec), template })
    const [first] = ranked
    if (opts.reserveFirst && first) {
      // counted before anything else runs: creates ranked at the same moment see each other
      // (between here and their placement in the store there are awaits)
      bump(placed, first, reservationOf(spec))
      if (template !== undefined) this.claimed(first, template)
    }
    return ranked
  }

  /**
   * A host's capacity less the pooled sandboxes of `template` this replica took there since its
   * last heartbeat: without it a burst of creates all goes to the host that had a full pool.
   */
  private poolAfterClaims(row: HostRow, template: string | undefined): HostCapacity {
    const capacity = JSON.parse(row.capacity) as HostCapacity
    const pooled = template === undefined ? 0 : (capacity.pool[template] ?? 0)
    if (pooled === 0) return capacity
    const since = Date.parse(row.heartbeat_at)
    const taken = (this.poolClaims.get(claimKey(row.id, template as string)) ?? []).filter((at) => at >= since).length
    return { ...capacity, pool: { ...capacity.pool, [template as string]: Math.max(0, pooled - taken) } }
  }

  /**
   * Pooled sandboxes taken lately (for `poolAfterClaims`), by host and template: when, the last
   * minute's. Keyed so a ranking over many hosts reads only each host's own claims.
   */
  private readonly poolClaims = new Map<string, number[]>()
  private claimsSwept = 0

  claimed(host: string, template: string): void {
    const now = Date.now()
    const key = claimKey(host, template)
    this.poolClaims.set(key, [...(this.poolClaims.get(key) ?? []).filter((at) => at >= now - CLAIM_MEMORY_MS), now])
    // claims of hosts no create goes to any more are dropped now and then
    if (now - this.claimsSwept < CLAIM_MEMORY_MS) return
    this.claimsSwept = now
    for (const [k, ats] of this.poolClaims) if ((ats.at(-1) ?? 0) < now - CLAIM_MEMORY_MS) this.poolClaims.delete(k)
  }
}

/** How long a pooled sandbox taken is remembered (heartbeats report pools every 2 s). */
const CLAIM_MEMORY_MS = 60_000

function claimKey(host: string, template: string): string {
  return `${host}\0${template}`
}
