// A template build's log, streamed: each line once and in order, across dropped connections.
import type { BuildLogEntry, TemplateBuild } from '@forkbox/protocol'
import { ConnectionError, ForkboxError } from './errors.ts'
import { type HttpClient, pathOf, type RequestOptions, sleep } from './http.ts'
import { eventError, serverSentEvents } from './sse.ts'

export interface FollowBuildOptions extends RequestOptions {
  /** Start at this line (a line's `seq + 1` resumes after it); default 0. */
  offset?: number
}

/** Reconnects in a row that bring no new line before the stream counts as broken. */
const MAX_RECONNECTS = 5
const RECONNECT_BASE_DELAY_MS = 100
const MAX_RECONNECT_DELAY_MS = 3000

export function buildPath(buildId: string): string {
  return pathOf('v1', 'builds', buildId)
}

/**
 * Yields the build's log lines from `offset` on as they are written, and returns the build as it
 * ended (ready or failed). A connection that breaks or ends early is opened again after the last
 * line seen, so no line is skipped or repeated.
 */
export async function* followBuildLogs(
  http: HttpClient,
  buildId: string,
  options: FollowBuildOptions = {},
): AsyncGenerator<BuildLogEntry, TemplateBuild> {
  let next = options.offset ?? 0
  let reconnects = 0
  for (;;) {
    const res = await http.send({
      method: 'GET',
      path: `${buildPath(buildId)}/logs`,
      query: { offset: next },
      accept: 'text/event-stream',
      signal: options.signal,
    })
    let cause: unknown
    try {
      for await (const { event, payload } of serverSentEvents(res, options.signal)) {
        if (event === 'error') throw eventError(payload, res)
        if (event === 'end') return payload as TemplateBuild
        if (event !== 'log') continue
        const entry = payload as BuildLogEntry
        if (entry.seq < next) continue
        next = entry.seq + 1
        reconnects = 0
        yield entry
      }
    } catch (err) {
      // the server's own answer, malformed data or the caller's abort end the stream; a broken connection does not
      if (err instanceof ForkboxError || err instanceof SyntaxError || options.signal?.aborted) throw err
      cause = err
    } finally {
      await res.body?.cancel().catch(() => {})
    }
    if (++reconnects > MAX_RECONNECTS)
      throw new ConnectionError('CONNECTION_ERROR', `the log stream of build ${buildId} keeps breaking off`, { cause })
    await sleep(Math.min(RECONNECT_BASE_DELAY_MS * 2 ** (reconnects - 1), MAX_RECONNECT_DELAY_MS), options.signal)
  }
}
