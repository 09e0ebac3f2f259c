// A build's log: lines numbered and written in the order the agent sends them, and followed live
// (what was written, then each line as it comes) until the build ends.
import { EventEmitter } from 'node:events'
import type { BuildLogEntry, BuildLogLine } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { BuildRecord, TemplateStore } from '../store/templates.ts'

export class BuildLogs {
  /** Live log lines and the end of builds in progress, by build id. */
  private readonly events = new EventEmitter()
  private readonly seqs = new Map<string, number>()
  /** Each running build's log writes, chained: lines land in order. */
  private readonly writes = new Map<string, Promise<void>>()

  constructor(
    private readonly store: TemplateStore,
    private readonly log: Logger,
  ) {
    this.events.setMaxListeners(0)
  }

  /** A build starts (again): its lines are numbered on from those already written. */
  async begin(id: string): Promise<void> {
    this.seqs.set(id, await this.store.logCount(id))
  }

  /**
   * Adds a line to the build's log: numbered now (the agent's lines come in order), written in
   * that order (one write after the other), then told to followers.
   */
  append(id: string, line: BuildLogLine): void {
    const seq = this.seqs.get(id) ?? 0
    this.seqs.set(id, seq + 1)
    const written = (this.writes.get(id) ?? Promise.resolve())
      .then(async () => {
        this.events.emit(`log:${id}`, await this.store.appendLog(id, seq, line))
      })
      .catch((err: unknown) => this.log.error({ err, buildId: id }, 'writing a build log line failed'))
    this.writes.set(id, written)
  }

  /** Every log line appended so far is written. */
  async flush(id: string): Promise<void> {
    await this.writes.get(id)
  }

  /** The build ended: its lines are written, its followers told. */
  async end(id: string): Promise<void> {
    await this.flush(id)
    this.seqs.delete(id)
    this.writes.delete(id)
    this.events.emit(`done:${id}`)
  }

  /** Resolves once the build running now ends. */
  ended(id: string): Promise<void> {
    return new Promise<void>((r) => this.events.once(`done:${id}`, () => r()))
  }

  /**
   * The build's log from `from` on, then every line as it comes until the build ends (or `signal`
   * aborts); resolves with the build as it ended.
   */
  async follow(
    id: string,
    from: number,
    onEntry: (e: BuildLogEntry) => Promise<void>,
    signal: AbortSignal,
  ): Promise<BuildRecord> {
    const pending: BuildLogEntry[] = []
    let wake: (() => void) | null = null
    let ended = false
    const onLine = (e: BuildLogEntry) => {
      pending.push(e)
      wake?.()
    }
    const onDone = () => {
      ended = true
      wake?.()
    }
    this.events.on(`log:${id}`, onLine)
    this.events.on(`done:${id}`, onDone)
    const onAbort = () => wake?.()
    signal.addEventListener('abort', onAbort)
    try {
      let next = from
      for (const e of await this.store.logs(id, next)) {
        await onEntry(e)
        next = e.seq + 1
      }
      for (;;) {
        while (pending.length > 0) {
          const e = pending.shift() as BuildLogEntry
          if (e.seq < next) continue
          await onEntry(e)
          next = e.seq + 1
        }
        const b = (await this.store.getBuild(id)) as BuildRecord
        if (b.status === 'ready' || b.status === 'failed' || signal.aborted) {
          // lines written between the last read and the end
          for (const e of await this.store.logs(id, next)) await onEntry(e)
          return b
        }
        // a line or the end that came during the read above: look again rather than wait
        if (pending.length > 0 || ended) {
          ended = false
          continue
        }
        await new Promise<void>((r) => {
          wake = r
        })
        wake = null
      }
    } finally {
      this.events.off(`log:${id}`, onLine)
      this.events.off(`done:${id}`, onDone)
      signal.removeEventListener('abort', onAbort)
    }
  }
}
