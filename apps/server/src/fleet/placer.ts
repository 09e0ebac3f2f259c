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
    const taken = this.poolClaims.filter((c) => c.host === row.id && c.template === template && c.at >= since).length
    return { ...capacity, pool: { ...capacity.pool, [template as string]: Math.max(0, pooled - taken) } }
  }

  /** Pooled sandboxes taken lately (for `poolAfterClaims`), the last minute's. */
  private readonly poolClaims: { host: string; template: string; at: number }[] = []

  claimed(host: string, template: string): void {
    const now = Date.now()
    while ((this.poolClaims[0]?.at ?? now) < now - 60_000) this.poolClaims.shift()
    this.poolClaims.push({ host, template, at: now })
  }
}
