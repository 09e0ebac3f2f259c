// The list pages: templates, snapshots (start a sandbox from one), and the live events of every
// sandbox of this key.
import {
  type BuildLogEntry,
  Sandbox,
  type SandboxEvent,
  type SnapshotInfo,
  type TemplateListing,
  type UserTemplate,
} from '@forkbox/sdk'
import { useEffect, useState } from 'preact/hooks'
import { ErrorLine, useEvents } from './live.tsx'
import { ScrollRegion } from './scroll.tsx'
import { describeError, type Session } from './session.ts'

function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { value: T | null; error: string } {
  const [value, setValue] = useState<T | null>(null)
  const [error, setError] = useState('')
  useEffect(() => {
    load().then(setValue, (err) => setError(describeError(err)))
  }, deps)
  return { value, error }
}

/** A user template's builds, and the log of one (followed live while it builds). */
function Builds({ session, name }: { session: Session; name: string }) {
  const { value: template, error } = useLoad<UserTemplate>(() => session.client.templates.get(name), [session, name])
  const [build, setBuild] = useState<string | null>(null)
  const [log, setLog] = useState<BuildLogEntry[]>([])
  const [logError, setLogError] = useState('')
  useEffect(() => {
    if (!build) return
    const abort = new AbortController()
    setLog([])
    setLogError('')
    ;(async () => {
      for await (const line of session.client.templates.logs(build, { follow: true, signal: abort.signal }))
        setLog((all) => [...all, line])
    })().catch((err) => {
      if (!abort.signal.aborted) setLogError(describeError(err))
    })
    return () => abort.abort()
  }, [session, build])
  const shown = template?.builds.find((b) => b.id === build)
  return (
    <section aria-label={`builds of ${name}`} class="builds">
      <h2>Builds of {name}</h2>
      <ErrorLine error={error || logError} />
      <ul class="files">
        {template?.builds.map((b) => (
          <li key={b.id}>
            <button type="button" class="link" onClick={() => setBuild(b.id)}>
              version {b.version}
            </button>
            <span class={`state ${b.status === 'failed' ? 'errored' : b.status === 'ready' ? 'running' : ''}`}>
              {b.status}
            </span>
            <span class="muted">{new Date(b.createdAt).toLocaleString()}</span>
          </li>
        ))}
      </ul>
      {build && (
        <ScrollRegion class="scroll-output" label={`log of build ${build}`}>
          <pre>
            {log.map((l) => `${l.message}\n`).join('')}
            {shown?.error ? `\n${shown.error.code}: ${shown.error.message}` : ''}
          </pre>
        </ScrollRegion>
      )}
    </section>
  )
}

export function TemplatesPage({ session }: { session: Session }) {
  const { value: templates, error } = useLoad<TemplateListing[]>(() => session.client.templates.list(), [session])
  const [open, setOpen] = useState<string | null>(null)
  return (
    <main>
      <h1>Templates</h1>
      <ErrorLine error={error} />
      {templates && (
        <ScrollRegion label="templates">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Version</th>
                <th scope="col">Ready</th>
                <th scope="col" class="wide">
                  Defaults
                </th>
                <th scope="col" class="wide">
                  Description
                </th>
                <th scope="col">
                  <span class="visually-hidden">Builds</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {templates.map((t) => (
                <tr key={`${t.name}@${t.version}`}>
                  <td>{t.name}</td>
                  <td>{t.version ?? 'built-in'}</td>
                  <td>{t.ready ? 'yes' : 'building'}</td>
                  <td class="wide">
                    {t.defaults.vcpus} vCPU, {t.defaults.memoryMB} MiB
                  </td>
                  <td class="wide desc">{t.description}</td>
                  <td>
                    {t.id !== null && (
                      <button type="button" class="quiet" onClick={() => setOpen(open === t.name ? null : t.name)}>
                        Builds
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollRegion>
      )}
      {open && <Builds session={session} name={open} />}
    </main>
  )
}

export function SnapshotsPage({ session }: { session: Session }) {
  const { value: snapshots, error } = useLoad<SnapshotInfo[]>(() => session.client.snapshots.list(), [session])
  const [actionError, setActionError] = useState('')
  const start = async (snapshot: SnapshotInfo) => {
    try {
      const sbx = await Sandbox.create({ ...session.conn, snapshot: snapshot.id })
      location.hash = `#/sandbox/${sbx.id}`
    } catch (err) {
      setActionError(describeError(err))
    }
  }
  return (
    <main>
      <h1>Snapshots</h1>
      <ErrorLine error={error || actionError} />
      {snapshots?.length === 0 && <p>No snapshots: take one from a sandbox (SDK `sbx.snapshot()`).</p>}
      {snapshots && snapshots.length > 0 && (
        <ScrollRegion label="snapshots">
          <table>
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Name</th>
                <th scope="col" class="wide">
                  Template
                </th>
                <th scope="col" class="wide">
                  Size
                </th>
                <th scope="col" class="wide">
                  Taken
                </th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {snapshots.map((s) => (
                <tr key={s.id}>
                  <td>{s.id}</td>
                  <td>{s.name ?? '—'}</td>
                  <td class="wide">{s.template}</td>
                  <td class="wide">{(s.sizeBytes / 1024 ** 2).toFixed(0)} MiB</td>
                  <td class="wide">{new Date(s.createdAt).toLocaleString()}</td>
                  <td>
                    <button type="button" onClick={() => void start(s)}>
                      Start sandbox
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollRegion>
      )}
    </main>
  )
}

export function EventsPage({ session }: { session: Session }) {
  const [events, setEvents] = useState<SandboxEvent[]>([])
  const [error, setError] = useState('')
  useEvents(session, { onEvent: (e) => setEvents((all) => [e, ...all].slice(0, 500)), onError: setError })
  return (
    <main>
      <h1>Events</h1>
      <ErrorLine error={error} />
      <ScrollRegion label="events">
        <table>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Sandbox</th>
              <th scope="col">Event</th>
              <th scope="col" class="wide">
                Detail
              </th>
            </tr>
          </thead>
          <tbody aria-live="polite">
            {events.map((e) => (
              <tr key={e.id}>
                <td>
                  <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time>
                </td>
                <td>
                  <a href={`#/sandbox/${e.sandboxId}`}>{e.sandboxId}</a>
                </td>
                <td>{e.type}</td>
                <td class="wide">{e.detail ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollRegion>
    </main>
  )
}
