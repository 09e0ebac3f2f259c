// The sandboxes of this key: a list kept live by the events stream (each event refetches it), a
// create form, and kill / fork from each row; running ones first, ended ones behind a filter.
import type { SandboxInfo, SandboxState, TemplateListing } from '@forkbox/sdk'
import { Sandbox } from '@forkbox/sdk'
import { useCallback, useEffect, useState } from 'preact/hooks'
import { DataTable } from './data-table.tsx'
import { ErrorLine, useEvents } from './live.tsx'
import { describeError, type Session } from './session.ts'
import { Sparklines } from './sparkline.tsx'

/** `a=1 b=2` as metadata pairs. */
function pairs(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const pair of text.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=')
    if (at > 0) out[pair.slice(0, at)] = pair.slice(at + 1)
  }
  return out
}

const STATES: SandboxState[] = ['running', 'starting', 'hibernated', 'errored', 'killed', 'lost']

/** Where a state sorts in the list: what a user can still act on first; past 2, the sandbox has ended. */
const RANK = { running: 0, starting: 1, hibernated: 2, errored: 3, lost: 4, killed: 5 } satisfies Record<
  SandboxState,
  number
>
const ended = (s: SandboxInfo) => RANK[s.state] > RANK.hibernated

/** Running first, then starting and hibernated, then the ended; newest first within each. */
function byState(a: SandboxInfo, b: SandboxInfo): number {
  return RANK[a.state] - RANK[b.state] || Date.parse(b.createdAt) - Date.parse(a.createdAt)
}

function age(iso: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000))
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`
}

function ttlLeft(sbx: SandboxInfo): string {
  if (sbx.state !== 'running') return '—'
  const s = Math.round((Date.parse(sbx.expiresAt) - Date.now()) / 1000)
  return s <= 0 ? 'now' : s < 60 ? `${s}s` : `${Math.floor(s / 60)}m`
}

/** The list, refetched (at most every 150 ms) whenever the key's events stream says something happened. */
function useLiveSandboxes(session: Session, state: SandboxState | '', metadata: string) {
  const [sandboxes, setSandboxes] = useState<SandboxInfo[] | null>(null)
  const [error, setError] = useState('')
  const refresh = useCallback(async () => {
    try {
      setSandboxes(await Sandbox.list({ ...session.conn, state: state || undefined, metadata: pairs(metadata) }))
      setError('')
    } catch (err) {
      setError(describeError(err))
    }
  }, [session, state, metadata])
  useEvents(session, { refresh, onError: (m) => setError(`live updates stopped: ${m}`) })
  return { sandboxes, error, refresh }
}

function CreateForm({ session }: { session: Session }) {
  const [templates, setTemplates] = useState<TemplateListing[]>([])
  const [template, setTemplate] = useState('code-interpreter')
  const [ttl, setTtl] = useState(600)
  const [vcpus, setVcpus] = useState('')
  const [memoryMB, setMemoryMB] = useState('')
  const [internet, setInternet] = useState(false)
  const [metadata, setMetadata] = useState('')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  useEffect(() => {
    session.client.templates.list().then(setTemplates, (err) => setError(describeError(err)))
  }, [session])
  const create = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError('')
    try {
      const resources = {
        ...(vcpus ? { vcpus: Number(vcpus) } : {}),
        ...(memoryMB ? { memoryMB: Number(memoryMB) } : {}),
      }
      await Sandbox.create({
        ...session.conn,
        template,
        ttlSeconds: ttl,
        resources,
        network: { internet },
        metadata: pairs(metadata),
      })
    } catch (err) {
      setError(describeError(err))
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="create" onSubmit={create} aria-label="create a sandbox">
      <label>
        Template
        <select value={template} onChange={(e) => setTemplate(e.currentTarget.value)}>
          {templates.length === 0 && <option value={template}>{template}</option>}
          {templates.map((t) => (
            <option key={t.name} value={t.name}>
              {t.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        TTL (s)
        <input
          type="number"
          min={1}
          value={ttl}
          onInput={(e) => setTtl(Number(e.currentTarget.value))}
          style={{ width: '6em' }}
        />
      </label>
      <label>
        vCPUs
        <input
          type="number"
          min={1}
          value={vcpus}
          placeholder="default"
          onInput={(e) => setVcpus(e.currentTarget.value)}
          style={{ width: '5.5em' }}
        />
      </label>
      <label>
        Memory (MiB)
        <input
          type="number"
          min={128}
          step={128}
          value={memoryMB}
          placeholder="default"
          onInput={(e) => setMemoryMB(e.currentTarget.value)}
          style={{ width: '6.5em' }}
        />
      </label>
      <label>
        <input type="checkbox" checked={internet} onChange={(e) => setInternet(e.currentTarget.checked)} /> Internet
      </label>
      <label>
        Metadata
        <input value={metadata} placeholder="team=a user=b" onInput={(e) => setMetadata(e.currentTarget.value)} />
      </label>
      <button type="submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create sandbox'}
      </button>
      <ErrorLine error={error} />
    </form>
  )
}

interface RowActionsProps {
  sbx: SandboxInfo
  session: Session
  onError: (message: string) => void
  /** What an action did, for the page's status line. */
  onDone: (message: string) => void
}

/** A row's actions: fork (with a count), hibernate or wake, snapshot, kill; one at a time, each on this row's id. */
function RowActions({ sbx, session, onError, onDone }: RowActionsProps) {
  const [forks, setForks] = useState(1)
  const [busy, setBusy] = useState('')
  const act = async (what: string, call: () => Promise<unknown>) => {
    setBusy(what)
    onError('')
    try {
      await call()
    } catch (err) {
      onError(`${sbx.id}: ${describeError(err)}`)
    } finally {
      setBusy('')
    }
  }
  if (sbx.state !== 'running' && sbx.state !== 'hibernated') return null
  return (
    <fieldset class="row-actions" aria-label={`actions on ${sbx.id}`}>
      <input
        type="number"
        min={1}
        max={16}
        value={forks}
        aria-label={`fork count for ${sbx.id}`}
        onInput={(e) => setForks(Number(e.currentTarget.value))}
        style={{ width: '3em' }}
      />
      <button
        type="button"
        disabled={busy !== ''}
        onClick={() => act('fork', async () => (await Sandbox.connect(sbx.id, session.conn)).fork({ count: forks }))}
      >
        {busy === 'fork' ? 'Forking…' : 'Fork'}
      </button>
      {sbx.state === 'running' ? (
        <button
          type="button"
          class="quiet"
          disabled={busy !== ''}
          onClick={() => act('hibernate', async () => (await Sandbox.connect(sbx.id, session.conn)).hibernate())}
        >
          {busy === 'hibernate' ? 'Hibernating…' : 'Hibernate'}
        </button>
      ) : (
        <button
          type="button"
          class="quiet"
          disabled={busy !== ''}
          onClick={() => act('wake', async () => (await Sandbox.connect(sbx.id, session.conn)).exec('true'))}
        >
          {busy === 'wake' ? 'Waking…' : 'Wake'}
        </button>
      )}
      <button
        type="button"
        class="quiet"
        disabled={busy !== ''}
        onClick={() =>
          act('snapshot', async () => {
            const taken = await (await Sandbox.connect(sbx.id, session.conn)).snapshot()
            onDone(`Snapshot ${taken.id} taken of ${sbx.id}.`)
          })
        }
      >
        {busy === 'snapshot' ? 'Snapshotting…' : 'Snapshot'}
      </button>
      <button
        type="button"
        class="danger"
        disabled={busy !== ''}
        onClick={() => act('kill', () => Sandbox.kill(sbx.id, session.conn))}
      >
        Kill
      </button>
    </fieldset>
  )
}

export function SandboxesPage({ session }: { session: Session }) {
  const [state, setState] = useState<SandboxState | ''>('')
  const [template, setTemplate] = useState('')
  const [metadata, setMetadata] = useState('')
  const [showEnded, setShowEnded] = useState(false)
  const [actionError, setActionError] = useState('')
  const [notice, setNotice] = useState('')
  const { sandboxes: all, error } = useLiveSandboxes(session, state, metadata)
  const ofTemplate = all && template ? all.filter((s) => s.template === template) : all
  const endedCount = ofTemplate?.filter(ended).length ?? 0
  // a state asked for by name shows even when it is an ended one
  const sandboxes =
    ofTemplate && (showEnded || state !== '' ? [...ofTemplate] : ofTemplate.filter((s) => !ended(s))).sort(byState)
  const templates = [...new Set(all?.map((s) => s.template))].sort()
  return (
    <main>
      <h1>Sandboxes</h1>
      <CreateForm session={session} />
      <div class="filters">
        <label>
          State
          <select value={state} onChange={(e) => setState(e.currentTarget.value as SandboxState | '')}>
            <option value="">all</option>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Template
          <select value={template} onChange={(e) => setTemplate(e.currentTarget.value)} aria-label="filter by template">
            <option value="">all</option>
            {templates.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Metadata
          <input
            value={metadata}
            placeholder="team=a"
            aria-label="filter by metadata"
            onInput={(e) => setMetadata(e.currentTarget.value)}
          />
        </label>
        <label>
          <input type="checkbox" checked={showEnded} onChange={(e) => setShowEnded(e.currentTarget.checked)} />
          Show ended ({endedCount})
        </label>
      </div>
      <ErrorLine error={error || actionError} />
      <p class="notice" role="status">
        {notice}
      </p>
      {sandboxes === null ? (
        <p>Loading…</p>
      ) : (
        <DataTable
          label="sandboxes"
          rows={sandboxes}
          rowKey={(s) => s.id}
          rowData={(s) => ({ 'data-sandbox': s.id })}
          empty={endedCount > 0 && !showEnded ? 'No running sandboxes.' : 'No sandboxes.'}
          cards
          columns={[
            {
              header: 'ID',
              cellClass: 'id',
              cell: (s) => (
                <a href={`#/sandbox/${s.id}`} title={s.id}>
                  {s.id}
                </a>
              ),
            },
            { header: 'Template', class: 'wide', cell: (s) => s.template },
            {
              header: 'State',
              cell: (s) => (
                <span class={`state ${s.state}`} data-state={s.state}>
                  {s.state}
                </span>
              ),
            },
            { header: 'Age', class: 'wide', cell: (s) => age(s.createdAt) },
            { header: 'TTL left', class: 'wide', cell: ttlLeft },
            {
              header: 'CPU / memory',
              class: 'wide',
              cell: (s) => (s.state === 'running' ? <Sparklines id={s.id} session={session} /> : null),
            },
            {
              header: 'Metadata',
              class: 'wide',
              cellClass: 'meta',
              cell: (s) => {
                const text = Object.entries(s.metadata)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(' ')
                return <span title={text}>{text}</span>
              },
            },
            {
              header: 'Actions',
              headerHidden: true,
              sticky: true,
              cell: (s) => <RowActions sbx={s} session={session} onError={setActionError} onDone={setNotice} />,
            },
          ]}
        />
      )}
    </main>
  )
}
