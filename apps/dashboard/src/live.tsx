// Pieces every page shares: the key's events stream as a hook, and the error line.
import type { SandboxEvent } from '@forkbox/sdk'
import { useEffect, useRef } from 'preact/hooks'
import { describeError, type Session } from './session.ts'

export interface EventsOptions {
  /** Only this sandbox's events. */
  sandboxId?: string
  /** Called now, and again (at most every 150 ms) after events: what the page shows refetched. */
  refresh?: () => unknown
  onEvent?: (e: SandboxEvent) => void
  /** The stream failed (not when the page left it). */
  onError?: (message: string) => void
}

/** Follows the key's events (past, then live) while the page shows. */
export function useEvents(session: Session, options: EventsOptions): void {
  const { sandboxId, refresh } = options
  // the latest callbacks, without following a new stream each time the page renders
  const callbacks = useRef(options)
  callbacks.current = options
  useEffect(() => {
    const abort = new AbortController()
    let timer: ReturnType<typeof setTimeout> | undefined
    void refresh?.()
    ;(async () => {
      for await (const e of session.client.events({ sandboxId, signal: abort.signal })) {
        callbacks.current.onEvent?.(e)
        if (refresh) {
          clearTimeout(timer)
          timer = setTimeout(refresh, 150)
        }
      }
    })().catch((err) => {
      if (!abort.signal.aborted) callbacks.current.onError?.(describeError(err))
    })
    return () => {
      abort.abort()
      clearTimeout(timer)
    }
  }, [session, sandboxId, refresh])
}

export function ErrorLine({ error }: { error: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null
}
