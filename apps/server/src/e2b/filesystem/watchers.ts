// The polled watchers (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`; E2B's Python client
// polls them): each keeps a watch here and hands out what it collected. A polled watcher lives on
// the control-plane process that created it.
import { randomUUID } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import type { SandboxCall } from '../sandbox-call.ts'
import { fsEvent, startWatch, type WatchRequest } from './watch-events.ts'

/** Events a polled watcher keeps for its next poll; past it, the watch waits (and the sandbox's queue fills). */
const MAX_BUFFERED_EVENTS = 10_000
/** A polled watcher no one asked for events this long is stopped. */
const POLL_IDLE_MS = 10 * 60_000
/** Polled watchers kept per sandbox (the guest holds 128 watches at most) and in all. */
const MAX_WATCHERS_PER_SANDBOX = 128
const MAX_WATCHERS = 10_000

interface Watcher {
  sandboxId: string
  events: unknown[]
  /** Set while the watch waits for a poll to make room. */
  room: (() => void) | null
  stop: AbortController
  lastPoll: number
  /** Why the watch ended under its poller (the sandbox went), said at the next poll. */
  failed: unknown
}

/** One per app, so two apps in a process never see each other's. */
export class Watchers {
  private readonly all = new Map<string, Watcher>()
  private sweeper: NodeJS.Timeout | null = null

  async create(call: SandboxCall, req: WatchRequest): Promise<{ watcherId: string }> {
    const mine = [...this.all.values()].filter((w) => w.sandboxId === call.sandboxId).length
    if (mine >= MAX_WATCHERS_PER_SANDBOX || this.all.size >= MAX_WATCHERS)
      throw new AppError(
        'RESOURCE_LIMIT_EXCEEDED',
        `too many watchers (at most ${MAX_WATCHERS_PER_SANDBOX} per sandbox): remove one first`,
      )
    const id = randomUUID()
    const w: Watcher = {
      sandboxId: call.sandboxId,
      events: [],
      room: null,
      stop: new AbortController(),
      lastPoll: Date.now(),
      failed: null,
    }
    const { started, done } = startWatch(
      call,
      req,
      async (changes) => {
        for (const e of changes) {
          if (w.events.length >= MAX_BUFFERED_EVENTS) await new Promise<void>((resolve) => (w.room = resolve))
          w.events.push(await fsEvent(call, e, req.includeEntry))
        }
      },
      w.stop.signal,
    )
    // its slot is taken at once: concurrent creates count against the caps
    this.all.set(id, w)
    done.catch((err: unknown) => {
      w.failed = err
    })
    try {
      await started
    } catch (err) {
      this.all.delete(id)
      throw err
    }
    this.sweep()
    return { watcherId: id }
  }

  private get(call: SandboxCall, id: string): Watcher {
    const w = this.all.get(id)
    if (!w || w.sandboxId !== call.sandboxId) throw new AppError('NOT_FOUND', `watcher ${id} not found`)
    return w
  }

  poll(call: SandboxCall, id: string): { events: unknown[] } {
    const w = this.get(call, id)
    w.lastPoll = Date.now()
    const events = w.events
    w.events = []
    w.room?.()
    w.room = null
    if (events.length === 0 && w.failed) {
      this.remove(call, id)
      throw w.failed
    }
    return { events }
  }

  remove(call: SandboxCall, id: string): Record<string, never> {
    this.drop(id, this.get(call, id))
    return {}
  }

  /** Forgets the watcher and stops its watch (one waiting for room is let go). */
  private drop(id: string, w: Watcher): void {
    this.all.delete(id)
    w.stop.abort()
    w.room?.()
  }

  /** Stops watchers no one polls (a client that went away without removing its watcher). */
  private sweep(): void {
    if (this.sweeper) return
    this.sweeper = setInterval(() => {
      const now = Date.now()
      for (const [id, w] of this.all) {
        if (now - w.lastPoll >= POLL_IDLE_MS) this.drop(id, w)
      }
      if (this.all.size === 0 && this.sweeper) {
        clearInterval(this.sweeper)
        this.sweeper = null
      }
    }, 60_000)
    this.sweeper.unref()
  }
}
