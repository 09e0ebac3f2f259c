// API keys: only a SHA-256 of each secret is stored (the secrets are 160 random bits).
import { createHash, randomBytes } from 'node:crypto'
import type { ApiKeyInfo } from '@forkbox/protocol'
import type { Selectable } from 'kysely'
import type { Db } from './db.ts'
import type { ApiKeysTable } from './schema.ts'

/** A key's row as read back: its hash stays in the database. */
type KeyRow = Omit<Selectable<ApiKeysTable>, 'hash'>

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

  async count(): Promise<number> {
    const r = await this.db
      .selectFrom('api_keys')
      .select((e) => e.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
    return Number(r.n)
  }

  /** `format: 'e2b'` issues `e2b_<hex>`, the form the E2B clients are configured with (issue 8). */
  async create(
    name: string,
    admin: boolean,
    format: 'forkbox' | 'e2b' = 'forkbox',
  ): Promise<ApiKeyInfo & { key: string }> {
    const secret = `${format === 'e2b' ? 'e2b' : 'fbx'}_${randomBytes(20).toString('hex')}`
    const row: KeyRow = {
      id: `key_${randomBytes(8).toString('hex')}`,
      name,
      prefix: secret.slice(0, 12),
      admin: admin ? 1 : 0,
      created_at: new Date().toISOString(),
      revoked_at: null,
    }
    await this.db
      .insertInto('api_keys')
      .values({ ...row, hash: hashKey(secret) })
      .execute()
    return { ...toInfo(row), key: secret }
  }

  async authenticate(secret: string): Promise<Principal | null> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'admin'])
      .where('hash', '=', hashKey(secret))
      .where('revoked_at', 'is', null)
      .executeTakeFirst()
    return row ? { keyId: row.id, admin: Number(row.admin) === 1 } : null
  }

  /** Whether the key exists and is not revoked (tokens derived for its sandboxes die with it). */
  async active(keyId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('api_keys')
      .select('id')
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst()
    return row !== undefined
  }

  async list(): Promise<ApiKeyInfo[]> {
    const rows = await this.db.selectFrom('api_keys').selectAll().orderBy('created_at').execute()
    return rows.map(toInfo)
  }

  async revoke(id: string): Promise<boolean> {
    const r = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date().toISOString() })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst()
    return Number(r.numUpdatedRows) > 0
  }
}
