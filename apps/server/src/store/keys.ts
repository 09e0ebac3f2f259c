// API keys: only a SHA-256 of each secret is stored (the secrets are 160 random bits).
import { createHash, randomBytes } from 'node:crypto'
import type { ApiKeyInfo } from '@forkbox/protocol'
import type { Db } from './db.ts'

interface KeyRow {
  id: string
  name: string
  prefix: string
  admin: number
  created_at: string
  revoked_at: string | null
}

export interface Principal {
  keyId: string
  admin: boolean
}

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

function toInfo(r: KeyRow): ApiKeyInfo {
  return { id: r.id, name: r.name, prefix: r.prefix, createdAt: r.created_at, revokedAt: r.revoked_at }
}

export class KeyStore {
  constructor(private readonly db: Db) {}

  count(): number {
    return (this.db.prepare('select count(*) as n from api_keys').get() as { n: number }).n
  }

  /** `format: 'e2b'` issues `e2b_<hex>`, the form the E2B clients are configured with (issue 8). */
  create(name: string, admin: boolean, format: 'forkbox' | 'e2b' = 'forkbox'): ApiKeyInfo & { key: string } {
    const secret = `${format === 'e2b' ? 'e2b' : 'fbx'}_${randomBytes(20).toString('hex')}`
    const row: KeyRow = {
      id: `key_${randomBytes(8).toString('hex')}`,
      name,
      prefix: secret.slice(0, 12),
      admin: admin ? 1 : 0,
      created_at: new Date().toISOString(),
      revoked_at: null,
    }
    this.db
      .prepare('insert into api_keys (id, name, prefix, hash, admin, created_at) values (?, ?, ?, ?, ?, ?)')
      .run(row.id, row.name, row.prefix, hashKey(secret), row.admin, row.created_at)
    return { ...toInfo(row), key: secret }
  }

  authenticate(secret: string): Principal | null {
    const row = this.db
      .prepare('select id, admin from api_keys where hash = ? and revoked_at is null')
      .get(hashKey(secret)) as { id: string; admin: number } | undefined
    return row ? { keyId: row.id, admin: row.admin === 1 } : null
  }

  /** Whether the key exists and is not revoked (tokens derived for its sandboxes die with it). */
  active(keyId: string): boolean {
    return this.db.prepare('select 1 from api_keys where id = ? and revoked_at is null').get(keyId) !== undefined
  }

  list(): ApiKeyInfo[] {
    return (this.db.prepare('select * from api_keys order by created_at').all() as KeyRow[]).map(toInfo)
  }

  revoke(id: string): boolean {
    return (
      this.db
        .prepare('update api_keys set revoked_at = ? where id = ? and revoked_at is null')
        .run(new Date().toISOString(), id).changes > 0
    )
  }
}
