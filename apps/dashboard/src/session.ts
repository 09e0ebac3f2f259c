// Who is signed in: the API key, kept in this tab's session storage (gone when the tab closes),
// and what it may see. Every call goes to the server that served the page, through the SDK.
import { type ConnectionOptions, ForkboxClient } from '@forkbox/sdk'

const KEY = 'forkbox.apiKey'

export interface Session {
  conn: ConnectionOptions & { apiKey: string; url: string }
  client: ForkboxClient
  /** The admin key sees the keys page. */
  admin: boolean
}

function sessionOf(apiKey: string, admin: boolean): Session {
  const conn = { apiKey, url: location.origin }
  return { conn, client: new ForkboxClient(conn), admin }
}

/** A character no key has: an HTTP header carries printable ASCII only (keys are `fbx_` and hex). */
const NOT_IN_A_KEY = /[^\x21-\x7e]/u

/** Why `apiKey` cannot be a key (it would never reach the server as one), or null when it may be. */
export function malformedKey(apiKey: string): string | null {
  const bad = NOT_IN_A_KEY.exec(apiKey)
  if (!bad) return null
  const char = bad[0]
  const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`
  const shown = /\s/u.test(char) ? `a space (${code})` : `"${char}" (${code})`
  const at = [...apiKey.slice(0, bad.index)].length + 1
  return `That API key is malformed: character ${at} is ${shown}, and a key has only ASCII letters, digits and symbols (fbx_…). Copy it again from where it was issued.`
}

/**
 * Checks the key against the server: throws the SDK's error (UNAUTHENTICATED, ...) when it is refused.
 * The key's own record (`GET /v1/keys/me`, which any key may read) proves it and says whether it is the
 * admin's, so a tenant's sign-in asks nothing it is refused.
 */
export async function signIn(apiKey: string): Promise<Session> {
  const malformed = malformedKey(apiKey)
  if (malformed) throw new Error(malformed)
  const me = await sessionOf(apiKey, false).client.keys.get('me')
  sessionStorage.setItem(KEY, apiKey)
  return sessionOf(apiKey, me.admin)
}

export async function restore(): Promise<Session | null> {
  const apiKey = sessionStorage.getItem(KEY)
  if (!apiKey) return null
  try {
    return await signIn(apiKey)
  } catch {
    sessionStorage.removeItem(KEY)
    return null
  }
}

export function signOut(): void {
  sessionStorage.removeItem(KEY)
}

/** A failure as one line for the page. */
export function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string }
  return e.code ? `${e.code}: ${e.message}` : String(e.message ?? err)
}
