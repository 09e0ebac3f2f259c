// What a credential proves (the key behind a secret) and the per-sandbox tokens derived from the
// server secret. Where a credential may come from, per route group, is credentials.ts; ownership
// of a sandbox is checked by the service the call reaches.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { KeyStore, Principal } from '../store/keys.ts'

/**
 * What a token lets its bearer do: reach a sandbox's exposed ports, or its envd (E2B clients); or
 * upload one E2B template file set (the id names the key, the files hash and the URL's expiry).
 */
export type TokenPurpose = 'port' | 'envd' | 'upload'

/** Whether two secrets are equal, in time that does not tell how much of them matched. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** What a signed file URL lets its bearer do, without a key. */
export interface SignedFile {
  sandboxId: string
  operation: 'read' | 'write'
  path: string
  user: string | undefined
  /** Unix seconds. */
  expires: number
}

function signedFileText(u: SignedFile): string {
  return JSON.stringify(['file', u.sandboxId, u.operation, u.path, u.user ?? '', u.expires])
}

const TOKEN_PREFIX: Record<TokenPurpose, string> = { port: 'fbt_', envd: '', upload: 'fbu_' }

/** An API key in `Authorization: Bearer` or `X-API-Key` (the same two places on every route). */
export function apiKeyIn(header: (name: string) => string | undefined): string | null {
  const bearer = /^Bearer\s+(\S+)$/i.exec(header('authorization') ?? '')?.[1]
  return bearer || header('x-api-key') || null
}

export class Authenticator {
  constructor(
    private readonly keys: KeyStore,
    /** The server secret (random, 0600, outside the database): keys every token's HMAC. */
    private readonly secret: Buffer,
  ) {}

  /** The key behind `secret`; null when there is none or it is revoked. */
  async principal(secret: string | null | undefined): Promise<Principal | null> {
    return secret ? this.keys.authenticate(secret) : null
  }

  /**
   * The token for one sandbox and purpose. Derived, never stored: the database holds nothing a
   * reader could replay, and the token is void once its owner's key is revoked (`verify`).
   */
  token(purpose: TokenPurpose, sandboxId: string): string {
    return TOKEN_PREFIX[purpose] + this.mac(purpose, sandboxId)
  }

  /**
   * The token for one sandbox and purpose stamped with `startSeconds` (unix seconds, 8 hex digits
   * ahead of the MAC): it works as the plain token does, and what it signs can be dated by it (E2B's
   * envd token: e2b/envd-token.ts).
   */
  stampedToken(purpose: TokenPurpose, sandboxId: string, startSeconds: number): string {
    const stamp = startSeconds.toString(16).padStart(8, '0')
    return TOKEN_PREFIX[purpose] + stamp + this.mac(purpose, `${sandboxId}:${stamp}`)
  }

  /** Whether `given` is the sandbox's token for `purpose` and its owner's key is still active. */
  async verify(purpose: TokenPurpose, sandboxId: string, owner: string, given: string): Promise<boolean> {
    return this.genuine(purpose, sandboxId, given) && (await this.keys.active(owner))
  }

  /**
   * The owner's key as it stands now if `given` is the sandbox's token for `purpose` (plain or
   * stamped): a token call may do what its owner's key may do today, not what it could when the
   * token was handed out.
   */
  async tokenPrincipal(purpose: TokenPurpose, sandboxId: string, owner: string, given: string) {
    return this.genuine(purpose, sandboxId, given) ? this.keys.principalOf(owner) : null
  }

  private genuine(purpose: TokenPurpose, sandboxId: string, given: string): boolean {
    if (sameSecret(this.token(purpose, sandboxId), given)) return true
    const prefix = TOKEN_PREFIX[purpose]
    const stamp = given.slice(prefix.length, prefix.length + 8)
    if (!given.startsWith(prefix) || !/^[0-9a-f]{8}$/.test(stamp)) return false
    return sameSecret(this.stampedToken(purpose, sandboxId, Number.parseInt(stamp, 16)), given)
  }

  /**
   * The signature of a file URL: one sandbox, one path, one operation, one user, until `expires`
   * (unix seconds). Checked by `verifyFileSignature`; void once the owner's key is revoked.
   */
  fileSignature(url: SignedFile): string {
    return createHmac('sha256', this.secret).update(signedFileText(url)).digest('base64url')
  }

  /** The owner's key as it stands now if `given` signs `url` and it has not expired; else null. */
  async verifyFileSignature(url: SignedFile, owner: string, given: string, now = Date.now()) {
    if (url.expires * 1000 < now || !sameSecret(this.fileSignature(url), given)) return null
    return this.keys.principalOf(owner)
  }

  private mac(purpose: TokenPurpose, subject: string): string {
    // 160 bits, like an API key's secret
    return createHmac('sha256', this.secret).update(`${purpose}:${subject}`).digest().subarray(0, 20).toString('hex')
  }
}
