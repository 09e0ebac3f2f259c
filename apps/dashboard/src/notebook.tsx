// A notebook cell: code run in the sandbox's default context, its output streamed as it comes,
// then its results (text, HTML tables, images) and its error with the traceback.
import type { Execution, Result, Sandbox } from '@forkbox/sdk'
import { useRef, useState } from 'preact/hooks'
import { ErrorLine } from './live.tsx'
import { describeError } from './session.ts'

function ResultView({ result }: { result: Result }) {
  if (result.png) return <img src={`data:image/png;base64,${result.png}`} alt={result.text ?? 'figure'} />
  if (result.jpeg) return <img src={`data:image/jpeg;base64,${result.jpeg}`} alt={result.text ?? 'figure'} />
  // the kernel's HTML (a DataFrame's table) shown in a sandboxed frame: it runs no script on this page
  if (result.html) return <iframe class="html-result" title="HTML result" sandbox="" srcDoc={result.html} />
  return <pre class="result">{result.text}</pre>
}

export function NotebookCell({ sandbox }: { sandbox: Sandbox }) {
  const [code, setCode] = useState('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
  const [stdout, setStdout] = useState('')
  const [stderr, setStderr] = useState('')
  const [execution, setExecution] = useState<Execution | null>(null)
  const [error, setError] = useState('')
  const [running, setRunning] = useState(false)
  const abort = useRef<AbortController | null>(null)
  const run = async () => {
    setRunning(true)
    setStdout('')
    setStderr('')
    setExecution(null)
    setError('')
    abort.current = new AbortController()
    try {
      setExecution(
        await sandbox.runCode(code, {
          onStdout: (t) => setStdout((s) => s + t),
          onStderr: (t) => setStderr((s) => s + t),
          signal: abort.current.signal,
        }),
      )
    } catch (err) {
      // leaving the request interrupts the cell in the kernel (the guest sends it SIGINT); the
      // kernel's variables stay
      setError(abort.current.signal.aborted ? 'Interrupted.' : describeError(err))
    } finally {
      setRunning(false)
    }
  }
  return (
    <section aria-label="notebook cell">
      <h2>Code</h2>
      <textarea
        aria-label="code"
        rows={6}
        value={code}
        onInput={(e) => setCode(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.shiftKey || e.ctrlKey || e.metaKey)) {
            e.preventDefault()
            if (!running) void run()
          }
        }}
      />
      <div class="cell-actions">
        <button type="button" onClick={run} disabled={running}>
          {running ? 'Running…' : 'Run (Shift+Enter)'}
        </button>
        {running && (
          <button type="button" class="quiet" onClick={() => abort.current?.abort()}>
            Interrupt
          </button>
        )}
      </div>
      <div class="cell-output" aria-live="polite">
        {stdout && <pre class="stdout">{stdout}</pre>}
        {stderr && <pre class="stderr">{stderr}</pre>}
        {execution?.results.map((r, i) => (
          <ResultView key={i} result={r} />
        ))}
        {execution?.error && (
          <pre class="traceback" role="alert">
            {`${execution.error.name}: ${execution.error.value}\n${execution.error.traceback}`}
          </pre>
        )}
        <ErrorLine error={error} />
      </div>
    </section>
  )
}
