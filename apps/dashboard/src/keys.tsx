// API keys (the admin key only): create (the secret is shown once), list, revoke.
import type { ApiKeyInfo } from '@forkbox/sdk'
import { useCallback, useEffect, useState } from 'preact/hooks'
import { ErrorLine } from './live.tsx'
import { ScrollRegion } from './scroll.tsx'
import { describeError, type Session } from './session.ts'

export function KeysPage({ session }: { session: Session }) {
  const [keys, setKeys] = useState<ApiKeyInfo[] | null>(null)
  const [name, setName] = useState('')
  const [secret, setSecret] = useState('')
  const [error, setError] = useState('')
  const load = useCallback(() => {
    session.client.keys.list().then(setKeys, (err) => setError(describeError(err)))
  }, [session])
  useEffect(load, [load])
  const create = async (e: Event) => {
    e.preventDefault()
    try {
      const made = await session.client.keys.create(name.trim())
      setSecret(made.key)
      setName('')
      load()
    } catch (err) {
      setError(describeError(err))
    }
  }
  const revoke = async (id: string) => {
    try {
      await session.client.keys.revoke(id)
      load()
    } catch (err) {
      setError(describeError(err))
    }
  }
  return (
    <main>
      <h1>API keys</h1>
      <form class="create" onSubmit={create}>
        <label>
          Name
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <button type="submit" disabled={name.trim() === ''}>
          Create key
        </button>
      </form>
      {secret && (
        <p class="secret" role="status">
          New key (shown once): <code>{secret}</code>
        </p>
      )}
      <ErrorLine error={error} />
      {keys && (
        <ScrollRegion label="API keys">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col">Created</th>
                <th scope="col">Revoked</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td>
                    <code>{k.prefix}</code>
                  </td>
                  <td>{new Date(k.createdAt).toLocaleString()}</td>
                  <td>{k.revokedAt ? new Date(k.revokedAt).toLocaleString() : '—'}</td>
                  <td>
                    {!k.revokedAt && (
                      <button type="button" class="danger" onClick={() => revoke(k.id)}>
                        Revoke
                      </button>
                    )}
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
