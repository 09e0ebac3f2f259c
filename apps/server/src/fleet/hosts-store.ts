// The fleet's hosts and where each sandbox and snapshot is: rows every replica shares.
import type { HostCapacity, JoinHostRequest } from '@forkbox/protocol'
import type { Selectable } from 'kysely'
import type { Db } from '../store/db.ts'
import type { HostsTable } from '../store/schema.ts'

export type HostRow = Selectable<HostsTable>

export type PlacementKind = 'sandbox' | 'snapshot'

/** What the control plane has put on one host. */
export interface Placed {
  sandboxes: number
  snapshots: number
  vcpus: number
  memoryMB: number
}

export class HostStore {
  constructor(private readonly db: Db) {}

  /** A join, first or again: a new nonce (the old credential stops working); a cordon survives it. */
  async join(req: JoinHostRequest, nonce: string): Promise<void> {
    const now = new Date().toISOString()
    const row = {
      url: req.url,
      nonce,
      joined_at: now,
      heartbeat_at: now,
      capacity: JSON.stringify(req.capacity),
      version: req.version,
    }
    await this.db
      .insertInto('hosts')
      .values({ id: req.id, state: 'ready', ...row })
      .onConflict((oc) => oc.column('id').doUpdateSet(row))
      .execute()
  }

  async heartbeat(id: string, capacity: HostCapacity): Promise<boolean> {
    const r = await this.db
      .updateTable('hosts')
      .set({ heartbeat_at: new Date().toISOString(), capacity: JSON.stringify(capacity) })
      .where('id', '=', id)
      .executeTakeFirst()
    return Number(r.numUpdatedRows) > 0
  }

  get(id: string): Promise<HostRow | undefined> {
    return this.db.selectFrom('hosts').selectAll().where('id', '=', id).executeTakeFirst()
  }

  list(): Promise<HostRow[]> {
    return this.db.selectFrom('hosts').selectAll().orderBy('id').execute()
  }

  async setState(id: string, state: 'ready' | 'cordoned'): Promise<boolean> {
    const r = await this.db.updateTable('hosts').set({ state }).where('id', '=', id).executeTakeFirst()
    return Number(r.numUpdatedRows) > 0
  }

  async place(
    id: string,
    kind: PlacementKind,
    host: string,
    reserve: { vcpus: number; memoryMB: number },
  ): Promise<void> {
    const row = { kind, host, vcpus: reserve.vcpus, memory_mb: reserve.memoryMB, created_at: new Date().toISOString() }
    await this.db
      .insertInto('placements')
      .values({ id, ...row })
      .onConflict((oc) => oc.column('id').doUpdateSet(row))
      .execute()
  }

  async unplace(id: string): Promise<void> {
    await this.db.deleteFrom('placements').where('id', '=', id).execute()
  }

  /** Records the hash of snapshot `id`'s image, as its holder reported it when it made it. */
  async setDigest(id: string, sha256: string): Promise<void> {
    await this.db.updateTable('placements').set({ sha256 }).where('id', '=', id).execute()
  }

  /** The recorded hash of snapshot `id`'s image (null: none, an image made before records were kept). */
  async digestOf(id: string): Promise<string | null> {
    const row = await this.db.selectFrom('placements').select('sha256').where('id', '=', id).executeTakeFirst()
    return row?.sha256 ?? null
  }

  /** Records that `host` has built template image `rootfs` whose export stream hashes to `sha256`. */
  async placeRootfs(rootfs: string, host: string, sha256: string): Promise<void> {
    const row = { sha256, created_at: new Date().toISOString() }
    await this.db
      .insertInto('rootfs_copies')
      .values({ rootfs, host, ...row })
      .onConflict((oc) => oc.columns(['rootfs', 'host']).doUpdateSet(row))
      .execute()
  }

  /** The hosts recorded to have template image `rootfs`, each with the hash recorded for its copy. */
  async rootfsCopies(rootfs: string): Promise<Map<string, string>> {
    const rows = await this.db
      .selectFrom('rootfs_copies')
      .select(['host', 'sha256'])
      .where('rootfs', '=', rootfs)
      .execute()
    return new Map(rows.map((r) => [r.host, r.sha256]))
  }

  async hostOf(id: string): Promise<string | undefined> {
    return (await this.db.selectFrom('placements').select('host').where('id', '=', id).executeTakeFirst())?.host
  }

  async placedOn(host: string, kind: PlacementKind): Promise<string[]> {
    const rows = await this.db
      .selectFrom('placements')
      .select('id')
      .where('host', '=', host)
      .where('kind', '=', kind)
      .execute()
    return rows.map((r) => r.id)
  }

  /** Sandboxes in state `lost`, with the host each is placed on. */
  lostSandboxes(): Promise<{ id: string; host: string }[]> {
    return this.db
      .selectFrom('placements as p')
      .innerJoin('sandboxes as s', 's.id', 'p.id')
      .select(['p.id', 'p.host'])
      .where('s.state', '=', 'lost')
      .execute()
  }

  /**
   * Sandboxes that ended before `before` and are still placed: their stop failed (their host was
   * unreachable then, or the call broke), so the host may still run them.
   */
  endedButPlaced(before: Date): Promise<{ id: string; host: string }[]> {
    return this.db
      .selectFrom('placements as p')
      .innerJoin('sandboxes as s', 's.id', 'p.id')
      .select(['p.id', 'p.host'])
      .where('p.kind', '=', 'sandbox')
      .where('s.state', 'in', ['killed', 'errored'])
      .where('s.ended_at', '<', before.toISOString())
      .execute()
  }

  /** What is placed on each host. */
  async placed(): Promise<Map<string, Placed>> {
    const rows = await this.db
      .selectFrom('placements')
      .select((eb) => [
        'host',
        'kind',
        eb.fn.countAll<number>().as('n'),
        eb.fn.sum<number>('vcpus').as('vcpus'),
        eb.fn.sum<number>('memory_mb').as('memory_mb'),
      ])
      .groupBy(['host', 'kind'])
      .execute()
    const out = new Map<string, Placed>()
    for (const r of rows) {
      const p = out.get(r.host) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 }
      if (r.kind === 'snapshot') p.snapshots += Number(r.n)
      else {
        p.sandboxes += Number(r.n)
        p.vcpus += Number(r.vcpus)
        p.memoryMB += Number(r.memory_mb)
      }
      out.set(r.host, p)
    }
    return out
  }
}
