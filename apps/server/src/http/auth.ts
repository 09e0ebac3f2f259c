// The one authentication layer every entry point uses (REST, E2B, terminals, exposed ports):
// where a credential may come from, what it proves, and the per-sandbox tokens derived from the
// server secret. Ownership of a sandbox is checked by the service the call reaches.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { AppError } from '@forkbox/protocol'
import type { KeyStore, Principal } from '../store/keys.ts'

/** What a sandbox token lets its bearer do: reach its exposed ports, or its envd (E2B clients). */
export type TokenPurpose = 'port' | 'envd'

const TOKEN_PREFIX: Record<TokenPurpose, string> = { port: 'fbt_', envd: '' }

type Headers = IncomingHttpHeaders | ((name: string) => string | undefined)

function header(headers: Headers, name: string): string | undefined {
  if (typeof headers === 'function') return headers(name)
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

/** An API key in `Authorization: Bearer` or `X-API-Key` (the same two places on every route). */
export function apiKeyIn(headers: Headers): string | null {
  const bearer = /^Bearer\s+(\S+)$/i.exec(header(headers, 'authorization') ?? '')?.[1]
  return bearer || header(headers, 'x-api-key') || null
}

export class Authenticator {
  constructor(
    private readonly keys: KeyStore,
    /** The server secret (random, 0600, outside the database): keys every token's HMAC. */
    private readonly secret: Buffer,
  ) {}

  /** The key behind `secret`; null when there is none or it is revoked. */
  principal(secret: string | null | undefined): Principal | null {
    return secret ? this.keys.authenticate(secret) : null
  }

  /** The key behind the request's API key; UNAUTHENTICATED without one or with a bad one. */
  require(secret: string | null | undefined): Principal {
    if (!secret) throw new AppError('UNAUTHENTICATED', 'an API key is required (Authorization: Bearer <key>)')
    const principal = this.principal(secret)
    if (!principal) throw new AppError('UNAUTHENTICATED', 'unknown or revoked API key')
    return principal
  }

  /**
   * The token for one sandbox and purpose. Derived, never stored: the database holds nothing a
   * reader could replay, and the token is void once its owner's key is revoked (`verify`).
   */
  token(purpose: TokenPurpose, sandboxId: string): string {
    return TOKEN_PREFIX[purpose] + this.mac(purpose, sandboxId)
  }

  /** Whether `given` is the sandbox's token for `purpose` and its owner's key is still active. */
  verify(purpose: TokenPurpose, sandboxId: string, owner: string, given: string): boolean {
    const expected = Buffer.from(this.token(purpose, sandboxId))
    const got = Buffer.from(given)
    return expected.length === got.length && timingSafeEqual(expected, got) && this.keys.active(owner)
  }

  private mac(purpose: TokenPurpose, sandboxId: string): string {
    // 160 bits, like an API key's secret
    return createHmac('sha256', this.secret).update(`${purpose}:${sandboxId}`).digest().subarray(0, 20).toString('hex')
  }
}
