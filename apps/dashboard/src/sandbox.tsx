// One sandbox: what it is, kill / hibernate / fork, a terminal and a notebook cell.
import { Sandbox, type SandboxEvent, type SandboxInfo } from '@forkbox/sdk'
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { FileBrowser } from './files.tsx'
import { ErrorLine, useEvents } from './live.tsx'
import { MetricsCharts } from './metrics.tsx'
import { NetworkEditor } from './network.tsx'
import { NotebookCell } from './notebook.tsx'
import { ProcessList } from './processes.tsx'
import { describeError, type Session } from './session.ts'
import { Terminals } from './terminal.tsx'

/** What the page knows, each piece with the id it is of: shown only while that id is the page's. */
interface Of<T> {
  id: string
  value: T
}

const of = <T,>(id: string, known: Of<T> | null): T | null => (known?.id === id ? known.value : null)

export function SandboxPage({ session, id }: { session: Session; id: string }) {
  const [handle, setHandle] = useState<Of<Sandbox> | null>(null)
  const [facts, setFacts] = useState<Of<SandboxInfo> | null>(null)
  const [failure, setFailure] = useState<Of<string> | null>(null)
  const [events, setEvents] = useState<SandboxEvent[]>([])
  // the id in the address now: an action whose page has moved on does nothing
  const shown = useRef(id)
  shown.current = id
  // one handle per sandbox: the terminal and the cell keep theirs while the facts refresh; a new id
  // starts from nothing, so a failed load leaves nothing of the sandbox before
  useEffect(() => {
    let current = true
    setHandle(null)
    setFacts(null)
    setFailure(null)
    setEvents([])
    Sandbox.connect(id, session.conn).then(
      (sbx) => current && setHandle({ id, value: sbx }),
      (err) => current && setFailure({ id, value: describeError(err) }),
    )
    return () => {
      current = false
    }
  }, [id, session])
  const sandbox = of(id, handle)
  const info = of(id, facts)
  const refresh = useCallback(async () => {
    if (!sandbox) return
    try {
      const value = await sandbox.getInfo()
      setFacts({ id: sandbox.id, value })
    } catch (err) {
      setFailure({ id: sandbox.id, value: describeError(err) })
    }
  }, [sandbox])
  // the facts follow the sandbox's own events (a new stream replays the past ones: kept once)
  useEvents(session, {
    sandboxId: id,
    refresh,
    onEvent: (e) => {
      if (e.sandboxId === shown.current)
        setEvents((all) => (all.some((x) => x.id === e.id) ? all : [...all, e].slice(-50)))
    },
  })
  /** Runs `call` on the handle the buttons were drawn for, unless the page shows another id by now. */
  const act = async (target: Sandbox, call: (sbx: Sandbox) => Promise<unknown>) => {
    if (target.id !== shown.current) return
    setFailure(null)
    try {
      await call(target)
    } catch (err) {
      setFailure({ id: target.id, value: describeError(err) })
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
      <ErrorLine error={of(id, failure) ?? ''} />
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
          <fieldset class="actions" aria-label={`actions on ${sandbox.id}`}>
            {running && (
              <button type="button" onClick={() => act(sandbox, (s) => s.hibernate())}>
                Hibernate
              </button>
            )}
            {info.state === 'hibernated' && (
              <button type="button" onClick={() => act(sandbox, (s) => s.exec('true'))}>
                Wake
              </button>
            )}
            {running && (
              <>
                <button type="button" class="quiet" onClick={() => act(sandbox, (s) => s.snapshot())}>
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
                <button type="button" class="quiet" onClick={() => act(sandbox, (s) => s.fork({ count: forks }))}>
                  Fork
                </button>
              </>
            )}
            {(running || info.state === 'hibernated') && (
              <button type="button" class="danger" onClick={() => act(sandbox, (s) => s.kill())}>
                Kill
              </button>
            )}
          </fieldset>
          {running && (
            // keyed by the id: nothing a pane holds (a terminal, a cell's output, an open file) outlives its sandbox
            <div key={sandbox.id}>
              <MetricsCharts sandbox={sandbox} />
              <div class="panes">
                <Terminals sandbox={sandbox} />
                <NotebookCell sandbox={sandbox} />
              </div>
              <FileBrowser sandbox={sandbox} />
              <ProcessList sandbox={sandbox} />
              <NetworkEditor sandbox={sandbox} info={info} onSaved={(value) => setFacts({ id: sandbox.id, value })} />
            </div>
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
