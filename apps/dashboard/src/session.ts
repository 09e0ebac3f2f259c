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

/** Checks the key against the server: throws the SDK's error (UNAUTHENTICATED, ...) when it is refused. */
export async function signIn(apiKey: string): Promise<Session> {
  const probe = sessionOf(apiKey, false)
  await probe.client.templates.list() // any key may list templates: proves the key
  const admin = await probe.client.keys.list().then(
    () => true,
    () => false,
  )
  sessionStorage.setItem(KEY, apiKey)
  return sessionOf(apiKey, admin)
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
