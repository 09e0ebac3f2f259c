// The shell: sign-in, the navigation, and the page the location hash names (#/, #/sandbox/ID, #/keys).
import { useEffect, useState } from 'preact/hooks'
import { KeysPage } from './keys.tsx'
import { EventsPage, SnapshotsPage, TemplatesPage } from './lists.tsx'
import { ErrorLine } from './live.tsx'
import { SandboxPage } from './sandbox.tsx'
import { SandboxesPage } from './sandboxes.tsx'
import { describeError, restore, type Session, signIn, signOut } from './session.ts'

const PAGES = [
  ['templates', 'Templates'],
  ['snapshots', 'Snapshots'],
  ['events', 'Events'],
] as const

function useHash(): string {
  const [hash, setHash] = useState(location.hash || '#/')
  useEffect(() => {
    const on = () => setHash(location.hash || '#/')
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  return hash
}

function SignIn({ onSession }: { onSession: (s: Session) => void }) {
  const [key, setKey] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      onSession(await signIn(key.trim()))
    } catch (err) {
      setError(describeError(err))
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class="signin">
      <h1>forkbox</h1>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autocomplete="off"
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          placeholder="fbx_..."
          required
        />
        <button type="submit" disabled={busy || key.trim() === ''}>
          Sign in
        </button>
        <ErrorLine error={error} />
      </form>
    </main>
  )
}

export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined)
  const hash = useHash()
  useEffect(() => {
    void restore().then(setSession)
  }, [])
  if (session === undefined) return <p class="loading">Loading…</p>
  if (session === null) return <SignIn onSession={setSession} />
  const sandboxId = /^#\/sandbox\/([\w-]+)$/.exec(hash)?.[1]
  let page = <SandboxesPage session={session} />
  // keyed by the id: another sandbox's page starts empty, never from the one before
  if (sandboxId) page = <SandboxPage key={sandboxId} session={session} id={sandboxId} />
  else if (hash === '#/keys' && session.admin) page = <KeysPage session={session} />
  else if (hash === '#/templates') page = <TemplatesPage session={session} />
  else if (hash === '#/snapshots') page = <SnapshotsPage session={session} />
  else if (hash === '#/events') page = <EventsPage session={session} />
  return (
    <>
      <header>
        <a class="brand" href="#/">
          forkbox
        </a>
        <nav aria-label="main">
          <a href="#/" aria-current={hash === '#/' ? 'page' : undefined}>
            Sandboxes
          </a>
          {PAGES.map(([path, label]) => (
            <a key={path} href={`#/${path}`} aria-current={hash === `#/${path}` ? 'page' : undefined}>
              {label}
            </a>
          ))}
          {session.admin && (
            <a href="#/keys" aria-current={hash === '#/keys' ? 'page' : undefined}>
              API keys
            </a>
          )}
        </nav>
        <button
          type="button"
          class="quiet"
          onClick={() => {
            signOut()
            setSession(null)
          }}
        >
          Sign out
        </button>
      </header>
      {page}
    </>
  )
}
