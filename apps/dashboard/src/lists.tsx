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
import { DataTable } from './data-table.tsx'
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
        <DataTable
          label="templates"
          rows={templates}
          rowKey={(t) => `${t.name}@${t.version}`}
          columns={[
            { header: 'Name', cell: (t) => t.name },
            { header: 'Version', cell: (t) => t.version ?? 'built-in' },
            // not ready: no build runs; the first sandbox started from it builds it
            { header: 'Ready', cell: (t) => (t.ready ? 'yes' : 'built on first use') },
            {
              header: 'Defaults',
              class: 'wide',
              cell: (t) => `${t.defaults.vcpus} vCPU, ${t.defaults.memoryMB} MiB`,
            },
            { header: 'Description', class: 'wide', cellClass: 'desc', cell: (t) => t.description },
            {
              header: 'Builds',
              headerHidden: true,
              cell: (t) =>
                t.id !== null && (
                  <button type="button" class="quiet" onClick={() => setOpen(open === t.name ? null : t.name)}>
                    Builds
                  </button>
                ),
            },
          ]}
        />
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
      {snapshots && (
        <DataTable
          label="snapshots"
          rows={snapshots}
          rowKey={(s) => s.id}
          empty="No snapshots: take one from a sandbox (SDK `sbx.snapshot()`)."
          columns={[
            { header: 'ID', cell: (s) => s.id },
            { header: 'Name', cell: (s) => s.name ?? '—' },
            { header: 'Template', class: 'wide', cell: (s) => s.template },
            { header: 'Size', class: 'wide', cell: (s) => `${(s.sizeBytes / 1024 ** 2).toFixed(0)} MiB` },
            { header: 'Taken', class: 'wide', cell: (s) => new Date(s.createdAt).toLocaleString() },
            {
              header: 'Actions',
              headerHidden: true,
              cell: (s) => (
                <button type="button" onClick={() => void start(s)}>
                  Start sandbox
                </button>
              ),
            },
          ]}
        />
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
      <DataTable
        label="events"
        rows={events}
        rowKey={(e) => e.id}
        live
        columns={[
          { header: 'Time', cell: (e) => <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time> },
          { header: 'Sandbox', cell: (e) => <a href={`#/sandbox/${e.sandboxId}`}>{e.sandboxId}</a> },
          { header: 'Event', cell: (e) => e.type },
          { header: 'Detail', class: 'wide', cell: (e) => e.detail ?? '' },
        ]}
      />
    </main>
  )
}
