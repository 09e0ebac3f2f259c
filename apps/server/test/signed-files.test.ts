import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { Authenticator, type SignedFile } from '../src/http/auth.ts'
import type { KeyStore } from '../src/store/keys.ts'

describe('signed file URLs', () => {
  const active = new Set(['key_a'])
  const principal = (keyId: string) => ({ keyId, admin: false, scopes: {}, quotas: {}, rateLimits: {} })
  const keys = {
    principalOf: async (id: string) => (active.has(id) ? principal(id) : null),
  } as unknown as KeyStore
  const auth = new Authenticator(keys, randomBytes(32))
  const url: SignedFile = { sandboxId: 'sbx_1', operation: 'read', path: '/work/a', user: undefined, expires: 1_000 }
  const sig = auth.fileSignature(url)

  it('holds until its expiry, then not', async () => {
    assert.equal(!!(await auth.verifyFileSignature(url, 'key_a', sig, 999_000)), true)
    assert.equal(!!(await auth.verifyFileSignature(url, 'key_a', sig, 1_000_000)), true)
    assert.equal(!!(await auth.verifyFileSignature(url, 'key_a', sig, 1_000_001)), false)
  })

  it('covers every field, and needs the owner key active', async () => {
    const now = 0
    for (const changed of [
      { sandboxId: 'sbx_2' },
      { operation: 'write' as const },
      { path: '/work/b' },
      { user: 'root' },
      { user: '' },
      { expires: 1_001 },
    ]) {
      const forged = { ...url, ...changed }
      if (changed.user === '') {
        // no user and an empty one ask the same (the default user): one signature for both is fine
        assert.equal(!!(await auth.verifyFileSignature(forged, 'key_a', sig, now)), true)
        continue
      }
      assert.equal(!!(await auth.verifyFileSignature(forged, 'key_a', sig, now)), false, JSON.stringify(changed))
    }
    assert.equal(!!(await auth.verifyFileSignature(url, 'key_b', sig, now)), false)
    assert.equal(!!(await auth.verifyFileSignature(url, 'key_a', `${sig}x`, now)), false)
    // another server secret signs differently
    assert.notEqual(new Authenticator(keys, randomBytes(32)).fileSignature(url), sig)
  })
})
