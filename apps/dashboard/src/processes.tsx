// Background processes: what is running, and the output of one as it is written.
import type { ProcessInfo, Sandbox } from '@forkbox/sdk'
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { ErrorLine } from './live.tsx'
import { ScrollRegion } from './scroll.tsx'
import { describeError } from './session.ts'

export function ProcessList({ sandbox }: { sandbox: Sandbox }) {
  const [processes, setProcesses] = useState<ProcessInfo[] | null>(null)
  const [watching, setWatching] = useState<number | null>(null)
  const [output, setOutput] = useState('')
  const [error, setError] = useState('')
  const follow = useRef<AbortController | null>(null)
  const load = useCallback(async () => {
    try {
      setProcesses(await sandbox.processes.list())
    } catch (err) {
      setError(describeError(err))
    }
  }, [sandbox])
  useEffect(() => {
    void load()
    return () => follow.current?.abort()
  }, [load])
  const watch = (pid: number) => {
    follow.current?.abort()
    const abort = new AbortController()
    follow.current = abort
    setWatching(pid)
    setOutput('')
    sandbox.processes
      .connect(pid)
      .wait({
        onStdout: (t) => setOutput((o) => o + t),
        onStderr: (t) => setOutput((o) => o + t),
        signal: abort.signal,
      })
      .then(() => load())
      .catch((err) => !abort.signal.aborted && setError(describeError(err)))
  }
  return (
    <section aria-label="background processes">
      <h2>
        Background processes{' '}
        <button type="button" class="quiet" onClick={() => void load()}>
          Refresh
        </button>
      </h2>
      <ErrorLine error={error} />
      {processes?.length === 0 && (
        <p class="muted">
          None: start one with `exec(cmd, {'{'} background: true {'}'})`.
        </p>
      )}
      <ul class="files">
        {processes?.map((p) => (
          <li key={p.pid}>
            <code>{p.pid}</code> <span>{p.cmd}</span>
            <span class="muted">{p.running ? 'running' : `exited ${p.exitCode ?? p.signal}`}</span>
            <span class="file-actions">
              <button type="button" class="quiet" onClick={() => watch(p.pid)}>
                Output
              </button>
            </span>
          </li>
        ))}
      </ul>
      {watching !== null && (
        <ScrollRegion class="scroll-output" label={`output of process ${watching}`}>
          <pre>{output}</pre>
        </ScrollRegion>
      )}
    </section>
  )
}
