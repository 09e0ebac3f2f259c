// A forkbox watch of a sandbox directory, its changes as envd's FilesystemEvents: what WatchDir
// streams and a polled watcher collects.
import type { z } from 'zod'
import { startWatch as startSandboxWatch, type WatchChange } from '../../services/watch.ts'
import { entryInfo } from '../entry-info.ts'
import type { WatchDirRequest } from '../messages.ts'
import type { SandboxCall } from '../sandbox-call.ts'

// filesystem.EventType
const EVENT_TYPE = { create: 1, write: 2, remove: 3, rename: 4, chmod: 5 } as const

export type WatchRequest = z.output<typeof WatchDirRequest>

/** A forkbox watch event as envd's FilesystemEvent; with `includeEntry`, the entry as it is now (none once gone). */
export async function fsEvent(call: SandboxCall, e: WatchChange, includeEntry: boolean) {
  const out = { name: e.name, type: EVENT_TYPE[e.type] }
  if (!includeEntry || e.type === 'remove' || e.type === 'rename') return out
  const entry = await call.services.files
    .stat(call.owner, call.sandboxId, { path: e.path, user: call.user })
    .catch(() => null)
  return entry ? { ...out, entry: entryInfo(entry) } : out
}

/** Watches the directory a request names until `signal`; `onEvents` gets each batch of changes. */
export function startWatch(
  call: SandboxCall,
  req: WatchRequest,
  onEvents: (changes: WatchChange[]) => Promise<void>,
  signal: AbortSignal,
) {
  const { owner, sandboxId } = call
  const watched = { path: req.path, recursive: req.recursive, user: call.user }
  return startSandboxWatch(call.services.files, owner, sandboxId, watched, { events: onEvents }, signal)
}
