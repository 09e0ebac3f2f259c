// One sandbox: what it is, kill / hibernate / fork, a terminal and a notebook cell.
import { Sandbox, type SandboxEvent, type SandboxInfo } from '@forkbox/sdk'
import { useCallback, useEffect, useState } from 'preact/hooks'
import { FileBrowser } from './files.tsx'
import { ErrorLine, useEvents } from './live.tsx'
import { MetricsCharts } from './metrics.tsx'
import { NetworkEditor } from './network.tsx'
import { NotebookCell } from './notebook.tsx'
import { ProcessList } from './processes.tsx'
import { describeError, type Session } from './session.ts'
import { Terminals } from './terminal.tsx'

export function SandboxPage({ session, id }: { session: Session; id: string }) {
  const [sandbox, setSandbox] = useState<Sandbox | null>(null)
  const [info, setInfo] = useState<SandboxInfo | null>(null)
  const [error, setError] = useState('')
  const [events, setEvents] = useState<SandboxEvent[]>([])
  // one handle per sandbox: the terminal and the cell keep theirs while the facts refresh
  useEffect(() => {
    let current = true
    Sandbox.connect(id, session.conn).then(
      (sbx) => current && setSandbox(sbx),
      (err) => current && setError(describeError(err)),
    )
    return () => {
      current = false
    }
  }, [id, session])
  const refresh = useCallback(async () => {
    if (!sandbox) return
    try {
      setInfo(await sandbox.getInfo())
    } catch (err) {
      setError(describeError(err))
    }
  }, [sandbox])
  // the facts follow the sandbox's own events (a new stream replays the past ones: kept once)
  useEvents(session, {
    sandboxId: id,
    refresh,
    onEvent: (e) => setEvents((all) => (all.some((x) => x.id === e.id) ? all : [...all, e].slice(-50))),
  })
  const act = async (call: () => Promise<unknown>) => {
    setError('')
    try {
      await call()
    } catch (err) {
      setError(describeError(err))
    }
  }
  const running = info?.state === 'running'
  const [forks, setForks] = useState(1)
  return (
    <main>
      <p>
        <a href="#/">← Sandboxes</a>
      </p>
      <h1>{id}</h1>
      <ErrorLine error={error} />
      {info && sandbox && (
        <>
          <dl class="facts">
            <dt>State</dt>
            <dd>
              <span class={`state ${info.state}`} data-state={info.state}>
                {info.state}
              </span>
            </dd>
            <dt>Template</dt>
            <dd>{info.template}</dd>
            <dt>Resources</dt>
            <dd>
              {info.resources.vcpus} vCPU, {info.resources.memoryMB} MiB, disk {info.resources.diskMB} MiB
            </dd>
            <dt>Expires</dt>
            <dd>{new Date(info.expiresAt).toLocaleString()}</dd>
            <dt>Internet</dt>
            <dd>{info.network.internet ? 'yes' : 'no'}</dd>
          </dl>
          <div class="actions">
            {running && (
              <button type="button" onClick={() => act(() => sandbox.hibernate())}>
                Hibernate
              </button>
            )}
            {info.state === 'hibernated' && (
              <button type="button" onClick={() => act(() => sandbox.exec('true'))}>
                Wake
              </button>
            )}
            {running && (
              <>
                <button type="button" class="quiet" onClick={() => act(() => sandbox.snapshot())}>
                  Snapshot
                </button>
                <input
                  type="number"
                  min={1}
                  max={16}
                  value={forks}
                  aria-label="fork count"
                  onInput={(e) => setForks(Number(e.currentTarget.value))}
                  style={{ width: '3.5em' }}
                />
                <button type="button" class="quiet" onClick={() => act(() => sandbox.fork({ count: forks }))}>
                  Fork
                </button>
              </>
            )}
            {(running || info.state === 'hibernated') && (
              <button type="button" class="danger" onClick={() => act(() => sandbox.kill())}>
                Kill
              </button>
            )}
          </div>
          {running && (
            <>
              <MetricsCharts sandbox={sandbox} />
              <div class="panes">
                <Terminals sandbox={sandbox} />
                <NotebookCell sandbox={sandbox} />
              </div>
              <FileBrowser sandbox={sandbox} />
              <ProcessList sandbox={sandbox} />
              <NetworkEditor sandbox={sandbox} info={info} onSaved={setInfo} />
            </>
          )}
          <section aria-label="events">
            <h2>Events</h2>
            <ol class="timeline">
              {events.map((e) => (
                <li key={e.id}>
                  <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time> <strong>{e.type}</strong>
                  {e.detail ? ` ${e.detail}` : ''}
                </li>
              ))}
            </ol>
          </section>
        </>
      )}
    </main>
  )
}
