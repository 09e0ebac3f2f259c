// API keys (the admin key only): create (the secret is shown once), list, revoke.
import type { ApiKeyInfo } from '@forkbox/sdk'
import { useCallback, useEffect, useState } from 'preact/hooks'
import { DataTable } from './data-table.tsx'
import { ErrorLine } from './live.tsx'
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
        <DataTable
          label="API keys"
          rows={keys}
          rowKey={(k) => k.id}
          columns={[
            { header: 'Name', cell: (k) => k.name },
            { header: 'Prefix', cell: (k) => <code>{k.prefix}</code> },
            { header: 'Created', cell: (k) => new Date(k.createdAt).toLocaleString() },
            { header: 'Revoked', cell: (k) => (k.revokedAt ? new Date(k.revokedAt).toLocaleString() : '—') },
            {
              header: 'Actions',
              headerHidden: true,
              cell: (k) =>
                !k.revokedAt && (
                  <button type="button" class="danger" onClick={() => revoke(k.id)}>
                    Revoke
                  </button>
                ),
            },
          ]}
        />
      )}
    </main>
  )
}
