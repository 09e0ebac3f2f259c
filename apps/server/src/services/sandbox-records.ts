// What every operation on a sandbox checks first: that it is the caller's (another key's is
// answered as one that does not exist), and, for a call that needs it running, that it is.
import { AppError } from '@forkbox/protocol'
import type { SandboxRecord, SandboxStore } from '../store/sandboxes.ts'

/** The owner's sandbox `id`; SANDBOX_NOT_FOUND when there is none or it is another key's. */
export async function ownRecord(store: SandboxStore, owner: string, id: string): Promise<SandboxRecord> {
  const s = await store.get(id)
  if (!s || s.owner !== owner) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${id}`)
  return s
}

/** The sandbox if it runs; else what a call on it is told (its host lost, errored, not running). */
export function mustRun(s: SandboxRecord): SandboxRecord {
  if (s.state === 'running') return s
  if (s.state === 'lost')
    throw new AppError('HOST_UNREACHABLE', `the host of sandbox ${s.id} is not answering; it may come back`, {
      reason: s.errorReason,
    })
  if (s.state === 'errored')
    throw new AppError('SANDBOX_ERRORED', `sandbox ${s.id} errored: ${s.errorMessage ?? s.errorReason}`, {
      reason: s.errorReason,
    })
  throw new AppError('SANDBOX_NOT_RUNNING', `sandbox ${s.id} is ${s.state}`, { state: s.state })
}
