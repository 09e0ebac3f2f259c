// A terminal into the sandbox: xterm.js over the SDK's PTY WebSocket, resized with its box.
import type { PtyHandle, Sandbox } from '@forkbox/sdk'
import { FitAddon } from '@xterm/addon-fit'
import { Terminal } from '@xterm/xterm'
import { useEffect, useRef, useState } from 'preact/hooks'
import { describeError } from './session.ts'

function TerminalView({ sandbox, label }: { sandbox: Sandbox; label: string }) {
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
    <div>
      <p class="muted term-status">
        {label}: {status}
      </p>
      <div class="term-box" ref={box} data-testid={label} />
    </div>
  )
}

/** Terminals in tabs: each keeps its program (and its PTY) while another is shown. */
export function Terminals({ sandbox }: { sandbox: Sandbox }) {
  const [tabs, setTabs] = useState([1])
  const [active, setActive] = useState(1)
  const add = () => {
    const next = Math.max(...tabs) + 1
    setTabs([...tabs, next])
    setActive(next)
  }
  const close = (tab: number) => {
    const rest = tabs.filter((t) => t !== tab)
    setTabs(rest)
    if (active === tab) setActive(rest.at(-1) ?? 0)
  }
  return (
    <section aria-label="terminals">
      <h2>Terminal</h2>
      <div class="tabs">
        <div role="tablist" aria-label="terminals" class="tablist">
          {tabs.map((t) => (
            <button key={t} type="button" role="tab" aria-selected={t === active} onClick={() => setActive(t)}>
              Terminal {t}
            </button>
          ))}
        </div>
        <button type="button" class="quiet" onClick={add}>
          New terminal
        </button>
        {tabs.length > 0 && (
          <button type="button" class="quiet" onClick={() => close(active)}>
            Close terminal {active}
          </button>
        )}
      </div>
      {tabs.map((t) => (
        <div key={t} role="tabpanel" aria-label={`Terminal ${t}`} hidden={t !== active}>
          <TerminalView sandbox={sandbox} label={`terminal ${t}`} />
        </div>
      ))}
    </section>
  )
}
