// Snapshots a key made: the agent holds the images, this holds who owns what.
import type { ResolvedResources, Snapshot } from '@forkbox/protocol'
import type { Selectable } from 'kysely'
import type { Db } from './db.ts'
import type { SnapshotsTable } from './schema.ts'
import { closePeriod, openSnapshotPeriod } from './usage.ts'

type SnapshotRow = Selectable<SnapshotsTable>

export interface SnapshotRecord extends Snapshot {
  owner: string
}

function toRecord(r: SnapshotRow): SnapshotRecord {
  return {
    id: r.id,
    name: r.name ?? null,
    owner: r.owner,
    sandboxId: r.sandbox_id,
    template: r.template,
    resources: JSON.parse(r.resources) as ResolvedResources,
    sizeBytes: Number(r.size_bytes),
    createdAt: r.created_at,
  }
}

export class SnapshotStore {
  constructor(private readonly db: Db) {}

  /** Records a snapshot; a name it is given moves to it from the owner's snapshot that had it. */
  async insert(s: Omit<SnapshotRecord, 'createdAt'>): Promise<SnapshotRecord> {
    const createdAt = new Date().toISOString()
    if (s.name)
      await this.db
        .updateTable('snapshots')
        .set({ name: null })
        .where('owner', '=', s.owner)
        .where('name', '=', s.name)
        .execute()
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('snapshots')
        .values({
          id: s.id,
          owner: s.owner,
          sandbox_id: s.sandboxId,
          template: s.template,
          resources: JSON.stringify(s.resources),
          size_bytes: s.sizeBytes,
          created_at: createdAt,
          name: s.name,
        })
        .execute()
      await openSnapshotPeriod(trx, s, createdAt)
    })
    return { ...s, createdAt }
  }

  async get(id: string): Promise<SnapshotRecord | null> {
    const row = await this.db.selectFrom('snapshots').selectAll().where('id', '=', id).executeTakeFirst()
    return row ? toRecord(row) : null
  }

  /** The owner's snapshot called `name` (the newest, should two ever have it). */
  async named(owner: string, name: string): Promise<SnapshotRecord | null> {
    const row = await this.db
      .selectFrom('snapshots')
      .selectAll()
      .where('owner', '=', owner)
      .where('name', '=', name)
      .orderBy('created_at', 'desc')
      .executeTakeFirst()
    return row ? toRecord(row) : null
  }

  async list(owner: string, filter: { name?: string } = {}): Promise<SnapshotRecord[]> {
    const rows = await this.db
      .selectFrom('snapshots')
      .selectAll()
      .where('owner', '=', owner)
      .$if(filter.name !== undefined, (q) => q.where('name', '=', filter.name as string))
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute()
    return rows.map(toRecord)
  }

  async ids(): Promise<string[]> {
    return (await this.db.selectFrom('snapshots').select('id').execute()).map((r) => r.id)
  }

  async delete(id: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('snapshots').where('id', '=', id).execute()
      await closePeriod(trx, id, new Date().toISOString())
    })
  }

  /** Bytes of the owner's snapshots. */
  async bytesOf(owner: string): Promise<number> {
    const r = await this.db
      .selectFrom('snapshots')
      .select((e) => e.fn.sum<number>('size_bytes').as('n'))
      .where('owner', '=', owner)
      .executeTakeFirst()
    return Number(r?.n ?? 0)
  }
}
