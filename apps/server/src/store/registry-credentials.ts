// A key's registry logins, for pulling its templates' images. The password is sealed at rest
// (AES-256-GCM under a key derived from the server secret, which lives beside, not in, the
// database) and never leaves the server except to the agent doing a pull.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import type { RegistryAuth } from '@forkbox/protocol'
import type { Db } from './db.ts'

export interface RegistryLogin {
  registry: string
  username: string
  createdAt: string
}

const IV_BYTES = 12

export class RegistryCredentialStore {
  private readonly key: Buffer

  constructor(
    private readonly db: Db,
    serverSecret: Buffer,
  ) {
    this.key = Buffer.from(hkdfSync('sha256', serverSecret, Buffer.alloc(0), 'forkbox registry credentials', 32))
  }

  private seal(plain: string, aad: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(Buffer.from(aad))
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')
  }

  private open(sealed: string, aad: string): string {
    const raw = Buffer.from(sealed, 'base64')
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES))
    decipher.setAAD(Buffer.from(aad))
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + 16))
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + 16)), decipher.final()]).toString('utf8')
  }

  /** Sets (or replaces) the key's login for `registry`. */
  async put(owner: string, registry: string, username: string, password: string): Promise<RegistryLogin> {
    const createdAt = new Date().toISOString()
    // bound to its row: a sealed password copied to another key's row does not open
    const sealed = this.seal(password, `${owner}\0${registry}\0${username}`)
    await this.db
      .insertInto('registry_credentials')
      .values({ owner, registry, username, sealed, created_at: createdAt })
      .onConflict((oc) =>
        oc.columns(['owner', 'registry']).doUpdateSet((eb) => ({
          username: eb.ref('excluded.username'),
          sealed: eb.ref('excluded.sealed'),
          created_at: eb.ref('excluded.created_at'),
        })),
      )
      .execute()
    return { registry, username, createdAt }
  }

  async list(owner: string): Promise<RegistryLogin[]> {
    return this.db
      .selectFrom('registry_credentials')
      .select(['registry', 'username', 'created_at as createdAt'])
      .where('owner', '=', owner)
      .orderBy('registry')
      .execute()
  }

  async delete(owner: string, registry: string): Promise<boolean> {
    const r = await this.db
      .deleteFrom('registry_credentials')
      .where('owner', '=', owner)
      .where('registry', '=', registry)
      .executeTakeFirst()
    return Number(r.numDeletedRows) > 0
  }

  /** Every login of the key, opened: what its builds pull with. */
  async auth(owner: string): Promise<RegistryAuth> {
    const rows = await this.db
      .selectFrom('registry_credentials')
      .select(['registry', 'username', 'sealed'])
      .where('owner', '=', owner)
      .execute()
    return Object.fromEntries(
      rows.map((r) => [
        r.registry,
        { username: r.username, password: this.open(r.sealed, `${owner}\0${r.registry}\0${r.username}`) },
      ]),
    )
  }
}
