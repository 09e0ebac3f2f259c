// E2B's envd access token, and the tokens an E2B signed file URL may have been made with. The
// clients sign a file URL with the token they hold (signature.ts), and one without
// `signature_expiration` carries no time of its own: the token carries it. Each token handed out is
// stamped with the start of the window it was handed out in (half of `e2bSignedUrlMaxSeconds`); a
// URL without an expiration is honoured only while its token's window is the current or the
// previous one. The stamp limits nothing else: the token works for envd calls while its owner's
// key does.
import type { Services } from '../http/env.ts'

type TokenServices = Pick<Services, 'auth' | 'config'>

/** Replicas' clocks may differ: a token another replica stamped a little ahead of this one's still counts. */
const SKEW_MS = 60_000

/** The stamping window in seconds; null when URLs without an expiration never expire (`off`). */
function windowSeconds(config: TokenServices['config']): number | null {
  const cap = config.e2bSignedUrlMaxSeconds
  return cap === 'off' ? null : Math.floor(cap / 2)
}

const windowStart = (ms: number, w: number) => Math.floor(ms / 1000 / w) * w

/** The envd token to hand out now (create, connect, GET of the sandbox). */
export function envdToken({ auth, config }: TokenServices, sandboxId: string, now = Date.now()): string {
  const w = windowSeconds(config)
  return w === null ? auth.token('envd', sandboxId) : auth.stampedToken('envd', sandboxId, windowStart(now, w))
}

export interface SignedUrlTime {
  /** When the sandbox was made (ms): no token of it is older. */
  createdAtMs: number
  /** The URL's `signature_expiration` (unix seconds), if it has one. */
  expiresAtSeconds: number | undefined
}

/**
 * The tokens a signed URL of `sandboxId` may have been signed with, newest first. With an
 * expiration: any handed out since the sandbox was made (the expiration bounds the URL). Without:
 * only the current and the previous window's, so the URL ends at most the cap after its token was
 * handed out, and no sooner than half of it; every token when the cap is `off`. Tokens stamped
 * under another cap are not found: changing the setting voids URLs signed before (not the tokens).
 */
export function signingTokens({ auth, config }: TokenServices, sandboxId: string, t: SignedUrlTime, now = Date.now()) {
  const w = windowSeconds(config)
  // what was handed out with the cap off (or before tokens were stamped)
  const plain = auth.token('envd', sandboxId)
  if (w === null) return [plain]
  const newest = windowStart(now + SKEW_MS, w)
  if (t.expiresAtSeconds === undefined) {
    const current = windowStart(now, w)
    const starts = new Set([newest, current, current - w])
    return [...starts].map((s) => auth.stampedToken('envd', sandboxId, s))
  }
  const tokens: string[] = []
  const last = Math.min(newest, windowStart(t.expiresAtSeconds * 1000, w))
  for (let s = last; s >= windowStart(t.createdAtMs, w); s -= w) tokens.push(auth.stampedToken('envd', sandboxId, s))
  tokens.push(plain)
  return tokens
}
