// A directory watch started for a caller that must know when it is set up: `started` resolves with
// the watched directory's absolute path (every change from then on is reported) or rejects with
// why the watch could not be; `done` settles when it ends. Each change comes with its absolute path.
import { posix } from 'node:path'
import { AppError, type WatchEnd, type WatchEvent } from '@forkbox/protocol'
import type { FileService } from './files.ts'

/** A change, with its absolute path beside its name (relative to the watched directory). */
export type WatchChange = WatchEvent & { path: string }

export interface StartedWatch {
  started: Promise<string>
  done: Promise<WatchEnd>
}

export function startWatch(
  files: FileService,
  owner: string,
  id: string,
  req: { path: string; recursive?: boolean; user?: string },
  on: {
    events(changes: WatchChange[]): Promise<void>
    overflow?(reason: string): Promise<void>
  },
  signal: AbortSignal,
): StartedWatch {
  let root = ''
  let began!: (path: string) => void
  let refused!: (err: unknown) => void
  const started = new Promise<string>((resolve, reject) => {
    began = resolve
    refused = reject
  })
  const done = files.watchDir(
    owner,
    id,
    req,
    {
      onStart: (path) => {
        root = path
        began(path)
      },
      onEvents: (events) => on.events(events.map((e) => ({ ...e, path: posix.join(root, e.name) }))),
      onOverflow: (reason) => on.overflow?.(reason),
    },
    signal,
  )
  done.then(() => refused(new AppError('GUEST_ERROR', 'the watch ended before it started')), refused)
  return { started, done }
}
