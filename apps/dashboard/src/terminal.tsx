// A terminal into the sandbox: xterm.js over the SDK's PTY WebSocket, resized with its box.
import type { PtyHandle, Sandbox } from '@forkbox/sdk'
import { FitAddon } from '@xterm/addon-fit'
import { Terminal } from '@xterm/xterm'
import { useEffect, useRef, useState } from 'preact/hooks'
import { describeError } from './session.ts'

export function TerminalView({ sandbox }: { sandbox: Sandbox }) {
  const box = useRef<HTMLDivElement>(null)
  const [status, setStatus] = useState('connecting…')
  useEffect(() => {
    const el = box.current
    if (!el) return
    const term = new Terminal({ cursorBlink: true, fontSize: 13, convertEol: false })
    const fit = new FitAddon()
    term.loadAddon(fit)
    term.open(el)
    fit.fit()
    let pty: PtyHandle | undefined
    let closed = false
    sandbox.pty
      .create({ cols: term.cols, rows: term.rows, onData: (d) => term.write(d) })
      .then((handle) => {
        if (closed) return handle.disconnect()
        pty = handle
        setStatus('connected')
        term.focus()
        handle.wait().then(
          (exit) => setStatus(`exited (${exit.exitCode})`),
          (err) => !closed && setStatus(describeError(err)),
        )
      })
      .catch((err) => setStatus(describeError(err)))
    const input = term.onData((d) => pty?.sendInput(d))
    const resize = term.onResize(({ cols, rows }) => pty?.resize(cols, rows))
    const observer = new ResizeObserver(() => fit.fit())
    observer.observe(el)
    return () => {
      closed = true
      observer.disconnect()
      input.dispose()
      resize.dispose()
      pty?.disconnect()
      term.dispose()
    }
  }, [sandbox])
  return (
    <section aria-label="terminal">
      <h2>
        Terminal <small>{status}</small>
      </h2>
      <div class="term-box" ref={box} data-testid="terminal" />
    </section>
  )
}
