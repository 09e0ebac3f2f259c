// The sandbox's network policy, edited in place (`updateNetwork`), and its exposed ports as links
// (each port is its own origin; the access token in the link lets the browser in once).
import type { Sandbox, SandboxInfo } from '@forkbox/sdk'
import { useEffect, useState } from 'preact/hooks'
import { ErrorLine } from './live.tsx'
import { describeError } from './session.ts'

const lines = (text: string) =>
  text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean)

export function NetworkEditor({
  sandbox,
  info,
  onSaved,
}: {
  sandbox: Sandbox
  info: SandboxInfo
  onSaved: (info: SandboxInfo) => void
}) {
  const policy = info.network
  const [internet, setInternet] = useState(policy.internet)
  const [allow, setAllow] = useState(policy.allowOut.join('\n'))
  const [deny, setDeny] = useState(policy.denyOut.join('\n'))
  const [ports, setPorts] = useState(policy.ports.join(', '))
  const [status, setStatus] = useState('')
  const [error, setError] = useState('')
  // another client's change shows here too
  useEffect(() => {
    setInternet(policy.internet)
    setAllow(policy.allowOut.join('\n'))
    setDeny(policy.denyOut.join('\n'))
    setPorts(policy.ports.join(', '))
  }, [policy])
  const save = async (e: Event) => {
    e.preventDefault()
    setError('')
    setStatus('')
    try {
      const updated = await sandbox.updateNetwork({
        internet,
        allowOut: lines(allow),
        denyOut: lines(deny),
        ports: lines(ports).map(Number),
      })
      onSaved(updated)
      setStatus('saved')
    } catch (err) {
      setError(describeError(err))
    }
  }
  const token = encodeURIComponent(sandbox.accessToken)
  return (
    <section aria-label="network">
      <h2>Network</h2>
      <form class="network" onSubmit={save}>
        <label>
          <input type="checkbox" checked={internet} onChange={(e) => setInternet(e.currentTarget.checked)} /> Internet
        </label>
        <label>
          Allow out (one per line)
          <textarea rows={3} value={allow} onInput={(e) => setAllow(e.currentTarget.value)} placeholder="pypi.org" />
        </label>
        <label>
          Deny out
          <textarea rows={3} value={deny} onInput={(e) => setDeny(e.currentTarget.value)} placeholder="10.0.0.0/8" />
        </label>
        <label>
          Exposed ports
          <input value={ports} onInput={(e) => setPorts(e.currentTarget.value)} placeholder="8080, 3000" />
        </label>
        <button type="submit">Save network</button>
        {status && <span role="status">{status}</span>}
      </form>
      <ErrorLine error={error} />
      {policy.ports.length > 0 && (
        <ul class="ports" aria-label="exposed ports">
          {policy.ports.map((p) => (
            <li key={p}>
              <a
                href={`${location.protocol}//${sandbox.getHost(p)}/?forkbox_token=${token}`}
                target="_blank"
                rel="noreferrer"
              >
                port {p}
              </a>
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}
