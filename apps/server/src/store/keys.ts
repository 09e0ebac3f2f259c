// API keys: only a SHA-256 of each secret is stored (the secrets are 160 random bits). A key has
// its scopes, quotas, rate limits and expiry; a rotation keeps the old secret valid for a grace.
import { createHash, randomBytes } from 'node:crypto'
import {
  type ApiKeyInfo,
  AppError,
  KeyQuotas,
  KeyRateLimits,
  KeyScopes,
  type UpdateKeyRequest,
} from '@forkbox/protocol'
import type { Selectable } from 'kysely'
import type { Db } from './db.ts'
import type { ApiKeysTable } from './schema.ts'

/** A key's row as read back: its hashes stay in the database. */
type KeyRow = Omit<Selectable<ApiKeysTable>, 'hash' | 'previous_hash'>

/** Who a request is: the key, what it may do and what it is limited to. */
export interface Principal {
  keyId: string
  admin: boolean
  scopes: KeyScopes
  quotas: KeyQuotas
  rateLimits: KeyRateLimits
}

export interface NewKey {
  name: string
  admin?: boolean
  format?: 'forkbox' | 'e2b'
  scopes?: KeyScopes
  quotas?: KeyQuotas
  rateLimits?: KeyRateLimits
  expiresAt?: Date | null
}

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** `limits` holds the quotas and rate limits: a stored value that no longer parses counts as unset. */
function limitsOf(r: Pick<KeyRow, 'limits'>): { quotas: KeyQuotas; rateLimits: KeyRateLimits } {
  const v = parseJson(r.limits) as { quotas?: unknown; rateLimits?: unknown }
  const quotas = KeyQuotas.safeParse(v?.quotas ?? {})
  const rateLimits = KeyRateLimits.safeParse(v?.rateLimits ?? {})
  return { quotas: quotas.success ? quotas.data : {}, rateLimits: rateLimits.success ? rateLimits.data : {} }
}

function scopesOf(r: Pick<KeyRow, 'scopes'>): KeyScopes {
  const s = KeyScopes.safeParse(parseJson(r.scopes) ?? {})
  // unreadable scopes allow nothing rather than everything
  return s.success ? s.data : { readOnly: true, noNetwork: true }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

function toInfo(r: KeyRow, now = Date.now()): ApiKeyInfo {
  const previous = r.previous_expires_at && Date.parse(r.previous_expires_at) > now ? r.previous_expires_at : null
  return {
    id: r.id,
    name: r.name,
    prefix: r.prefix,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
    admin: Number(r.admin) === 1,
    expiresAt: r.expires_at,
    previousSecretExpiresAt: previous,
    scopes: scopesOf(r),
    ...limitsOf(r),
  }
}

function newSecret(format: 'forkbox' | 'e2b'): string {
  return `${format === 'e2b' ? 'e2b' : 'fbx'}_${randomBytes(20).toString('hex')}`
}

const COLUMNS = [
  'id',
  'name',
  'prefix',
  'admin',
  'created_at',
  'revoked_at',
  'limits',
  'scopes',
  'expires_at',
  'previous_expires_at',
] as const

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
  async create(k: NewKey): Promise<ApiKeyInfo & { key: string }> {
    const secret = newSecret(k.format ?? 'forkbox')
    const row: KeyRow = {
      id: `key_${randomBytes(8).toString('hex')}`,
      name: k.name,
      prefix: secret.slice(0, 12),
      admin: k.admin ? 1 : 0,
      created_at: new Date().toISOString(),
      revoked_at: null,
      limits: JSON.stringify({ quotas: k.quotas ?? {}, rateLimits: k.rateLimits ?? {} }),
      scopes: JSON.stringify(k.scopes ?? {}),
      expires_at: k.expiresAt ? k.expiresAt.toISOString() : null,
      previous_expires_at: null,
    }
    await this.db
      .insertInto('api_keys')
      .values({ ...row, hash: hashKey(secret) })
      .execute()
    return { ...toInfo(row), key: secret }
  }

  /** The key behind `secret`: its current secret, or its previous one within a rotation's grace. */
  async authenticate(secret: string, now = new Date()): Promise<Principal | null> {
    const hash = hashKey(secret)
    const at = now.toISOString()
    const row = await this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where((e) =>
        e.or([e('hash', '=', hash), e.and([e('previous_hash', '=', hash), e('previous_expires_at', '>', at)])]),
      )
      .where('revoked_at', 'is', null)
      .where((e) => e.or([e('expires_at', 'is', null), e('expires_at', '>', at)]))
      .executeTakeFirst()
    if (!row) return null
    return { keyId: row.id, admin: Number(row.admin) === 1, scopes: scopesOf(row), ...limitsOf(row) }
  }

  /**
   * The key `keyId` as it stands now (its current scopes and limits), if it is active: what a call
   * made with one of its sandboxes' tokens or signed URLs may do.
   */
  async principalOf(keyId: string, now = new Date()): Promise<Principal | null> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .where((e) => e.or([e('expires_at', 'is', null), e('expires_at', '>', now.toISOString())]))
      .executeTakeFirst()
    if (!row) return null
    return { keyId: row.id, admin: Number(row.admin) === 1, scopes: scopesOf(row), ...limitsOf(row) }
  }

  /** Whether the key exists, is not revoked and has not expired (tokens derived for its sandboxes die with it). */
  async active(keyId: string, now = new Date()): Promise<boolean> {
    const row = await this.db
      .selectFrom('api_keys')
      .select('id')
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .where((e) => e.or([e('expires_at', 'is', null), e('expires_at', '>', now.toISOString())]))
      .executeTakeFirst()
    return row !== undefined
  }

  async get(id: string): Promise<ApiKeyInfo> {
    const row = await this.db.selectFrom('api_keys').select(COLUMNS).where('id', '=', id).executeTakeFirst()
    if (!row) throw new AppError('KEY_NOT_FOUND', `no key ${id}`)
    return toInfo(row)
  }

  async list(): Promise<ApiKeyInfo[]> {
    const rows = await this.db.selectFrom('api_keys').select(COLUMNS).orderBy('created_at').execute()
    const now = Date.now()
    return rows.map((r) => toInfo(r, now))
  }

  async update(id: string, change: UpdateKeyRequest): Promise<ApiKeyInfo> {
    const current = await this.get(id)
    if (current.revokedAt) throw new AppError('KEY_NOT_FOUND', `key ${id} is revoked`)
    const quotas = change.quotas ?? current.quotas
    const rateLimits = change.rateLimits ?? current.rateLimits
    await this.db
      .updateTable('api_keys')
      .set({
        name: change.name ?? current.name,
        scopes: JSON.stringify(change.scopes ?? current.scopes),
        limits: JSON.stringify({ quotas, rateLimits }),
        expires_at: change.expiresAt === undefined ? current.expiresAt : change.expiresAt,
      })
      .where('id', '=', id)
      .execute()
    return this.get(id)
  }

  /**
   * A new secret for key `id`; the old one is still accepted for `graceSeconds` (a rotation during
   * another's grace ends the oldest secret at once).
   */
  async rotate(id: string, graceSeconds: number): Promise<ApiKeyInfo & { key: string }> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(['hash', 'prefix', 'revoked_at'])
      .where('id', '=', id)
      .executeTakeFirst()
    if (!row || row.revoked_at) throw new AppError('KEY_NOT_FOUND', `no key ${id}`)
    const secret = newSecret(row.prefix.startsWith('e2b_') ? 'e2b' : 'forkbox')
    const r = await this.db
      .updateTable('api_keys')
      .set({
        hash: hashKey(secret),
        prefix: secret.slice(0, 12),
        previous_hash: graceSeconds > 0 ? row.hash : null,
        previous_expires_at: graceSeconds > 0 ? new Date(Date.now() + graceSeconds * 1000).toISOString() : null,
      })
      .where('id', '=', id)
      // one rotation at a time: a concurrent one changed the hash meanwhile
      .where('hash', '=', row.hash)
      .executeTakeFirst()
    if (Number(r.numUpdatedRows) === 0) throw new AppError('CONFLICT', 'the key was rotated meanwhile')
    return { ...(await this.get(id)), key: secret }
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
