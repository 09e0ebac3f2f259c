// `sandbox.files.watch`: a directory's changes as they happen, over the server's SSE stream.
import type { WatchEnd, WatchEventType } from '@forkbox/protocol'
import { ForkboxError } from './errors.ts'
import type { HttpClient } from './http.ts'
import { eventError, type ServerSentEvent, serverSentEvents } from './sse.ts'

/** One change in a watched directory. */
export interface FileChange {
  type: WatchEventType
  /** Relative to the watched directory ("" for the directory itself). */
  name: string
  /** Absolute, in the sandbox. */
  path: string
}

export interface WatchOptions {
  /** Watch the directories under it too, including those created later. */
  recursive?: boolean
  /** The sandbox user to watch as (they must be able to read the directory); the server's default is `user`. */
  user?: string
  /** Stops the watch, as `handle.stop()` does. */
  signal?: AbortSignal
  /** Changes were lost (the sandbox's kernel queue overflowed): list the directory again to catch up. */
  onOverflow?(reason: string): void
}

/** A running watch: `stop()` ends it; `done` settles when it ends (rejects if the sandbox went). */
export class WatchHandle {
  /** The watched directory, absolute. */
  readonly path: string
  /** `stopped` by `stop()` or the signal, or the directory is `gone` (removed or moved away). */
  readonly done: Promise<WatchEnd>
  readonly #abort: AbortController

  /** @internal From `sandbox.files.watch`. */
  constructor(path: string, done: Promise<WatchEnd>, abort: AbortController) {
    this.path = path
    this.done = done
    this.#abort = abort
    done.catch(() => {})
  }

  /** Stops watching; resolves once the stream is closed. */
  async stop(): Promise<void> {
    this.#abort.abort()
    await this.done.catch(() => {})
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop()
  }
}

/**
 * Opens the watch; resolves once it is set up (every change from then on goes to `onChange`, in
 * order; the next is not read until a returned promise settles).
 */
export async function watchDir(
  http: HttpClient,
  base: string,
  path: string,
  onChange: (change: FileChange) => void | Promise<void>,
  options: WatchOptions,
): Promise<WatchHandle> {
  const abort = new AbortController()
  const onAbort = () => abort.abort()
  if (options.signal?.aborted) abort.abort()
  options.signal?.addEventListener('abort', onAbort, { once: true })
  const res = await http.send({
    method: 'GET',
    path: `${base}/watch`,
    query: { path, recursive: options.recursive, user: options.user },
    accept: 'text/event-stream',
    signal: abort.signal,
  })
  const events = serverSentEvents(res, abort.signal)
  const unexpected = () => new ForkboxError('UNEXPECTED_RESPONSE', `the watch of ${path} ended without saying why`)
  const first = await events.next()
  if (first.done || first.value.event !== 'start') {
    await events.return(undefined)
    if (!first.done && first.value.event === 'error') throw eventError(first.value.payload, res)
    throw unexpected()
  }
  const root = String((first.value.payload as { path?: unknown }).path ?? path)
  const follow = async (): Promise<WatchEnd> => {
    try {
      for await (const e of events as AsyncIterable<ServerSentEvent>) {
        const p = e.payload as Record<string, unknown>
        if (e.event === 'change')
          await onChange({ type: p.type as WatchEventType, name: String(p.name), path: String(p.path) })
        else if (e.event === 'overflow') options.onOverflow?.(String(p.reason))
        else if (e.event === 'end') return { reason: 'gone' }
        else if (e.event === 'error') throw eventError(e.payload, res)
      }
    } catch (err) {
      if (abort.signal.aborted) return { reason: 'stopped' }
      throw err
    } finally {
      options.signal?.removeEventListener('abort', onAbort)
    }
    if (abort.signal.aborted) return { reason: 'stopped' }
    throw unexpected()
  }
  return new WatchHandle(root, follow(), abort)
}
