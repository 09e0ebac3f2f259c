// Snapshots a key made: the agent holds the images, this holds who owns what.
import type { ResolvedResources, Snapshot } from '@forkbox/protocol'
import type { Db } from './db.ts'

interface SnapshotRow {
  id: string
  owner: string
  sandbox_id: string
  template: string
  resources: string
  size_bytes: number
  created_at: string
}

export interface SnapshotRecord extends Snapshot {
  owner: string
}

function toRecord(r: SnapshotRow): SnapshotRecord {
  return {
    id: r.id,
    owner: r.owner,
    sandboxId: r.sandbox_id,
    template: r.template,
    resources: JSON.parse(r.resources) as ResolvedResources,
    sizeBytes: r.size_bytes,
    createdAt: r.created_at,
  }
}

export class SnapshotStore {
  constructor(private readonly db: Db) {}

  insert(s: Omit<SnapshotRecord, 'createdAt'>): SnapshotRecord {
    const createdAt = new Date().toISOString()
    this.db
      .prepare(
        'insert into snapshots (id, owner, sandbox_id, template, resources, size_bytes, created_at) values (?, ?, ?, ?, ?, ?, ?)',
      )
      .run(s.id, s.owner, s.sandboxId, s.template, JSON.stringify(s.resources), s.sizeBytes, createdAt)
    return { ...s, createdAt }
  }

  get(id: string): SnapshotRecord | null {
    const row = this.db.prepare('select * from snapshots where id = ?').get(id) as SnapshotRow | undefined
    return row ? toRecord(row) : null
  }

  list(owner: string): SnapshotRecord[] {
    return (
      this.db
        .prepare('select * from snapshots where owner = ? order by created_at desc, id')
        .all(owner) as SnapshotRow[]
    ).map(toRecord)
  }

  ids(): string[] {
    return (this.db.prepare('select id from snapshots').all() as { id: string }[]).map((r) => r.id)
  }

  delete(id: string): void {
    this.db.prepare('delete from snapshots where id = ?').run(id)
  }
}
