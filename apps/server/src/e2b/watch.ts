// envd's directory watches over forkbox's: `WatchDir` streams the changes; `CreateWatcher`,
// `GetWatcherEvents` and `RemoveWatcher` (E2B's Python client polls them) keep a watch here and
// hand out what it collected. A polled watcher lives on the control-plane process that created it.
import { randomUUID } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { startWatch as startSandboxWatch, type WatchChange } from '../services/watch.ts'
import { type ServerStream, sandboxUnary, serverStream, streamRequest } from './connect.ts'
import { entryInfo } from './entry-info.ts'
import { WatchDirRequest, WatcherRequest } from './messages.ts'
import { type SandboxCall, sandboxCall } from './sandbox-call.ts'

// filesystem.EventType
const EVENT_TYPE = { create: 1, write: 2, remove: 3, rename: 4, chmod: 5 } as const
/** Events a polled watcher keeps for its next poll; past it, the watch waits (and the sandbox's queue fills). */
const MAX_BUFFERED_EVENTS = 10_000
/** A polled watcher no one asked for events this long is stopped. */
const POLL_IDLE_MS = 10 * 60_000
/** Polled watchers kept per sandbox (the guest holds 128 watches at most) and in all. */
const MAX_WATCHERS_PER_SANDBOX = 128
const MAX_WATCHERS = 10_000

type Request = z.output<typeof WatchDirRequest>

/** A forkbox watch event as envd's FilesystemEvent; with `includeEntry`, the entry as it is now (none once gone). */
async function fsEvent(call: SandboxCall, e: WatchChange, includeEntry: boolean) {
  const out = { name: e.name, type: EVENT_TYPE[e.type] }
  if (!includeEntry || e.type === 'remove' || e.type === 'rename') return out
  const entry = await call.services.calls
    .fileOp(call.owner, call.sandboxId, { op: 'stat', path: e.path, user: call.user })
    .catch(() => null)
  return entry ? { ...out, entry: entryInfo(entry) } : out
}

function startWatch(
  call: SandboxCall,
  req: Request,
  onEvents: (changes: WatchChange[]) => Promise<void>,
  signal: AbortSignal,
) {
  const { owner, sandboxId } = call
  const watched = { path: req.path, recursive: req.recursive, user: call.user }
  return startSandboxWatch(call.services.calls, owner, sandboxId, watched, { events: onEvents }, signal)
}

async function watchDir(c: Context<AppEnv>, out: ServerStream): Promise<void> {
  const call = await sandboxCall(c)
  const req = await streamRequest(c, WatchDirRequest)
  const { started, done } = startWatch(
    call,
    req,
    async (changes) => {
      for (const e of changes) await out.send({ filesystem: await fsEvent(call, e, req.includeEntry) })
    },
    out.signal,
  )
  await started
  await out.send({ start: {} })
  await done
}

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

class Watchers {
  private readonly all = new Map<string, Watcher>()
  private sweeper: NodeJS.Timeout | null = null

  async create(call: SandboxCall, req: Request): Promise<{ watcherId: string }> {
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

export function registerWatch(app: { post(path: string, handler: (c: Context<AppEnv>) => unknown): unknown }): void {
  const watchers = new Watchers()
  app.post('/filesystem.Filesystem/WatchDir', (c) => serverStream(c, { keepalive: {} }, (out) => watchDir(c, out)))
  app.post(
    '/filesystem.Filesystem/CreateWatcher',
    sandboxUnary(WatchDirRequest, (call, req) => watchers.create(call, req)),
  )
  app.post(
    '/filesystem.Filesystem/GetWatcherEvents',
    sandboxUnary(WatcherRequest, async (call, req) => watchers.poll(call, req.watcherId)),
  )
  app.post(
    '/filesystem.Filesystem/RemoveWatcher',
    sandboxUnary(WatcherRequest, async (call, req) => watchers.remove(call, req.watcherId)),
  )
}
