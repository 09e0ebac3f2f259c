// Calls across a message channel (the control plane ↔ a remote host agent): one peer per end,
// values carried with what JSON cannot say (bytes, errors, callbacks, promises, streams,
// abort signals), so an interface like `AgentApi` works across it unchanged. The wire format is
// rpc-wire.ts's; the other end's streams and iterators are made local ones by rpc-streams.ts.
import { z } from 'zod'
import { AppError } from './errors.ts'
import { importedIterable, importedStream, type RemoteSource } from './rpc-streams.ts'
import { decodeFrame, encodeFrame, errorFromWire, errorToWire, Msg, TAG, tagged } from './rpc-wire.ts'

export { decodeFrame, encodeFrame } from './rpc-wire.ts'

/** Where a peer's frames go; `receive` is called with each frame from the other end. */
export interface RpcChannel {
  send(frame: Uint8Array): void
}

/** What a peer serves: the methods the other end may call, by name. */
export type RpcTarget = Record<string, (...args: never[]) => unknown>

/** What a pull is answered with: the next value, or the end. */
const Pulled = z.object({ done: z.boolean(), value: z.unknown().optional() })

interface Deferred {
  resolve(v: unknown): void
  reject(e: Error): void
}

/** What one call made on this side for the other end (exported) or stands in for (imported). */
interface Scope {
  exports: Set<number>
  /** Promises and streams (either side's) of this call not yet settled or ended. */
  live: number
  /** For the caller: the call's own result has come. For the callee: it has been sent. */
  returned: boolean
  /** Run when the scope ends (listeners and imported signals to let go of). */
  cleanup: (() => void)[]
}

type Exported =
  | { kind: 'fn'; scope: number; fn: (...args: unknown[]) => unknown }
  | { kind: 'iter'; scope: number; it: AsyncIterator<unknown> }
  | { kind: 'stream'; scope: number; reader: ReadableStreamDefaultReader<unknown> }

/**
 * One end of a call channel. Served methods run on `target`; `call` runs one at the other end.
 * Everything a call passes or returns that JSON cannot carry stays on the side that made it and
 * is reached through references, which live until the call and what it returned are done.
 */
export class RpcPeer {
  private nextId = 1
  private readonly scopes = new Map<number, Scope>()
  private readonly exported = new Map<number, Exported>()
  /** Replies this side waits for: calls, invokes and pulls. */
  private readonly waiting = new Map<number, Deferred & { scope: number }>()
  /** Promises of the other end this side stands in for. */
  private readonly promises = new Map<number, Deferred & { scope: number }>()
  /** Abort signals of the other end, as controllers this side fires. */
  private readonly signals = new Map<number, AbortController>()
  private closedWith: Error | null = null

  constructor(
    private readonly channel: RpcChannel,
    private readonly target: RpcTarget = {},
    private readonly onEvent: (name: string, args: unknown[]) => void = () => {},
  ) {}

  /** Calls `method` at the other end. */
  call(method: string, args: unknown[]): Promise<unknown> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    const c = this.id()
    const scope: Scope = { exports: new Set(), live: 0, returned: false, cleanup: [] }
    this.scopes.set(c, scope)
    return new Promise((resolve, reject) => {
      this.waiting.set(c, { resolve, reject, scope: c })
      try {
        this.send({ t: 'call', c, m: method, a: args as unknown[] }, c)
      } catch (err) {
        this.waiting.delete(c)
        this.endScope(c)
        reject(err)
      }
    })
  }

  /** Raises an event at the other end (not part of any call). */
  emit(name: string, args: unknown[]): void {
    if (!this.closedWith) this.send({ t: 'event', n: name, a: args }, 0)
  }

  /** A frame from the other end. A frame that breaks the protocol throws: close the channel. */
  receive(frame: Uint8Array): void {
    const { header, blobs } = decodeFrame(frame)
    const msg = Msg.parse(header)
    switch (msg.t) {
      case 'call':
        this.serve(msg.c, msg.m, msg.a, blobs)
        return
      case 'ret':
      case 'reply': {
        const key = msg.t === 'ret' ? msg.c : msg.k
        const w = this.waiting.get(key)
        if (!w) return
        this.waiting.delete(key)
        if (msg.e !== undefined) w.reject(errorFromWire(msg.e))
        else w.resolve(this.fromWire(msg.v, blobs, w.scope))
        if (msg.t === 'ret') this.returnedAt(msg.c)
        return
      }
      case 'settle': {
        const p = this.promises.get(msg.p)
        if (!p) return
        this.promises.delete(msg.p)
        if (msg.e !== undefined) p.reject(errorFromWire(msg.e))
        else p.resolve(this.fromWire(msg.v, blobs, p.scope))
        this.liveDone(p.scope)
        return
      }
      case 'invoke':
        this.runExported(msg.f, msg.k, msg.a, blobs)
        return
      case 'pull':
        this.pullExported(msg.s, msg.k)
        return
      case 'cancel':
        this.cancelExported(msg.s)
        return
      case 'abort':
        this.signals.get(msg.s)?.abort(new AppError('CANCELLED', 'cancelled by the caller'))
        return
      case 'event':
        this.onEvent(msg.n, this.fromWire(msg.a, blobs, 0) as unknown[])
        return
    }
  }

  /** The channel is gone: every call and reference of it fails with `err`, every signal fires. */
  close(err: Error): void {
    if (this.closedWith) return
    this.closedWith = err
    for (const w of this.waiting.values()) w.reject(err)
    for (const p of this.promises.values()) p.reject(err)
    for (const s of this.signals.values()) s.abort(err)
    for (const e of this.exported.values()) {
      if (e.kind === 'iter') e.it.return?.().catch(() => {})
      if (e.kind === 'stream') e.reader.cancel(err).catch(() => {})
    }
    this.waiting.clear()
    this.promises.clear()
    this.signals.clear()
    this.exported.clear()
    this.scopes.clear()
  }

  get closed(): boolean {
    return this.closedWith !== null
  }

  private id(): number {
    return this.nextId++
  }

  private send(msg: Msg, scope: number): void {
    const blobs: Uint8Array[] = []
    const header = { ...msg } as Record<string, unknown>
    for (const key of ['a', 'v'] as const) if (key in header) header[key] = this.toWire(header[key], blobs, scope)
    this.channel.send(encodeFrame(header, blobs))
  }

  private serve(c: number, method: string, wireArgs: unknown[], blobs: Uint8Array[]): void {
    const scope: Scope = { exports: new Set(), live: 0, returned: false, cleanup: [] }
    this.scopes.set(c, scope)
    const fn = Object.hasOwn(this.target, method) ? this.target[method] : undefined
    const answer = (v: unknown, e?: unknown) => {
      if (this.closedWith) return
      try {
        if (e === undefined) this.send({ t: 'ret', c, v }, c)
        else this.send({ t: 'ret', c, e: errorToWire(e) }, c)
      } catch (err) {
        this.send({ t: 'ret', c, e: errorToWire(err) }, c)
      }
      this.returnedAt(c)
    }
    if (!fn) {
      answer(undefined, new AppError('NOT_IMPLEMENTED', `no method ${method}`))
      return
    }
    let args: unknown[]
    try {
      args = this.fromWire(wireArgs, blobs, c) as unknown[]
    } catch (err) {
      answer(undefined, err)
      return
    }
    Promise.resolve()
      .then(() => (fn as (...a: unknown[]) => unknown).apply(this.target, args))
      .then(
        (v) => answer(v),
        (e: unknown) => answer(undefined, e ?? new Error('failed')),
      )
  }

  private runExported(f: number, k: number, wireArgs: unknown[], blobs: Uint8Array[]): void {
    const e = this.exported.get(f)
    const reply = (v: unknown, err?: unknown) => {
      if (this.closedWith) return
      if (err === undefined) this.send({ t: 'reply', k, v }, e?.scope ?? 0)
      else this.send({ t: 'reply', k, e: errorToWire(err) }, 0)
    }
    if (e?.kind !== 'fn') {
      reply(undefined, new AppError('INTERNAL', 'the function is gone'))
      return
    }
    Promise.resolve()
      .then(() => e.fn(...(this.fromWire(wireArgs, blobs, e.scope) as unknown[])))
      .then(
        (v) => reply(v),
        (err: unknown) => reply(undefined, err ?? new Error('failed')),
      )
  }

  private pullExported(s: number, k: number): void {
    const e = this.exported.get(s)
    const reply = (v: unknown, err?: unknown) => {
      if (this.closedWith) return
      if (err === undefined) this.send({ t: 'reply', k, v }, e?.scope ?? 0)
      else this.send({ t: 'reply', k, e: errorToWire(err) }, 0)
    }
    if (!e || e.kind === 'fn') {
      reply(undefined, new AppError('INTERNAL', 'the stream is gone'))
      return
    }
    const next = e.kind === 'iter' ? e.it.next() : e.reader.read()
    next.then(
      (r) => {
        if (r.done) this.dropExport(s)
        reply({ done: !!r.done, value: r.done ? undefined : r.value })
      },
      (err: unknown) => {
        this.dropExport(s)
        reply(undefined, err ?? new Error('failed'))
      },
    )
  }

  private cancelExported(s: number): void {
    const e = this.exported.get(s)
    if (!e) return
    if (e.kind === 'iter') e.it.return?.().catch(() => {})
    if (e.kind === 'stream') e.reader.cancel().catch(() => {})
    this.dropExport(s)
  }

  private dropExport(id: number): void {
    const e = this.exported.get(id)
    if (!e) return
    this.exported.delete(id)
    if (e.kind === 'stream') this.liveDone(e.scope)
  }

  private export(scope: number, entry: Exported): number {
    const id = this.id()
    this.exported.set(id, entry)
    this.scopes.get(scope)?.exports.add(id)
    return id
  }

  private liveAdd(scope: number): void {
    const s = this.scopes.get(scope)
    if (s) s.live++
  }

  private liveDone(scope: number): void {
    const s = this.scopes.get(scope)
    if (!s) return
    s.live--
    this.maybeEnd(scope)
  }

  private returnedAt(c: number): void {
    const s = this.scopes.get(c)
    if (!s) return
    s.returned = true
    this.maybeEnd(c)
  }

  private maybeEnd(c: number): void {
    const s = this.scopes.get(c)
    if (s?.returned && s.live <= 0) this.endScope(c)
  }

  /** A call and everything it returned are done: its functions can no longer be reached. */
  private endScope(c: number): void {
    const s = this.scopes.get(c)
    if (!s) return
    this.scopes.delete(c)
    for (const id of s.exports) {
      const e = this.exported.get(id)
      // an argument's iterator the other end never finished (its call failed early)
      if (e?.kind === 'iter') e.it.return?.().catch(() => {})
      this.exported.delete(id)
    }
    for (const f of s.cleanup) f()
  }

  private toWire(value: unknown, blobs: Uint8Array[], scope: number): unknown {
    if (value === undefined) return { [TAG.undef]: 1 }
    if (value === null || typeof value !== 'object') {
      if (typeof value === 'function')
        return { [TAG.fn]: this.export(scope, { kind: 'fn', scope, fn: value as (...a: unknown[]) => unknown }) }
      return value
    }
    if (value instanceof Uint8Array) {
      blobs.push(value)
      return { [TAG.bytes]: blobs.length - 1 }
    }
    if (value instanceof Error) return { [TAG.error]: errorToWire(value) }
    if (typeof AbortSignal !== 'undefined' && value instanceof AbortSignal)
      return { [TAG.signal]: this.exportSignal(value, scope) }
    if (typeof ReadableStream !== 'undefined' && value instanceof ReadableStream) {
      this.liveAdd(scope)
      return { [TAG.stream]: this.export(scope, { kind: 'stream', scope, reader: value.getReader() }) }
    }
    if (typeof (value as PromiseLike<unknown>).then === 'function')
      return { [TAG.promise]: this.exportPromise(value as PromiseLike<unknown>, scope) }
    if (Array.isArray(value)) return value.map((v) => this.toWire(v, blobs, scope))
    if (Symbol.asyncIterator in value) {
      const it = (value as AsyncIterable<unknown>)[Symbol.asyncIterator]()
      return { [TAG.iter]: this.export(scope, { kind: 'iter', scope, it }) }
    }
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = this.toWire(v, blobs, scope)
    // methods of a class instance (e.g. a terminal session) travel as functions bound to it
    let proto = Object.getPrototypeOf(value) as object | null
    while (proto && proto !== Object.prototype) {
      for (const name of Object.getOwnPropertyNames(proto)) {
        const m = (value as Record<string, unknown>)[name]
        if (name !== 'constructor' && !(name in out) && typeof m === 'function')
          out[name] = this.toWire((m as (...a: unknown[]) => unknown).bind(value), blobs, scope)
      }
      proto = Object.getPrototypeOf(proto) as object | null
    }
    return out
  }

  private exportSignal(signal: AbortSignal, scope: number): number {
    const id = this.id()
    const fire = () => {
      if (!this.closedWith) this.send({ t: 'abort', s: id }, 0)
    }
    if (signal.aborted) queueMicrotask(fire)
    else {
      signal.addEventListener('abort', fire, { once: true })
      this.scopes.get(scope)?.cleanup.push(() => signal.removeEventListener('abort', fire))
    }
    return id
  }

  private exportPromise(p: PromiseLike<unknown>, scope: number): number {
    const id = this.id()
    this.liveAdd(scope)
    Promise.resolve(p).then(
      (v) => {
        if (!this.closedWith) this.send({ t: 'settle', p: id, v }, scope)
        this.liveDone(scope)
      },
      (e: unknown) => {
        if (!this.closedWith) this.send({ t: 'settle', p: id, e: errorToWire(e) }, scope)
        this.liveDone(scope)
      },
    )
    return id
  }

  private fromWire(value: unknown, blobs: Uint8Array[], scope: number): unknown {
    if (value === null || typeof value !== 'object') return value
    if (Array.isArray(value)) return value.map((v) => this.fromWire(v, blobs, scope))
    const tag = tagged(value)
    if (!tag) {
      const out: Record<string, unknown> = {}
      for (const [k, v] of Object.entries(value)) out[k] = this.fromWire(v, blobs, scope)
      return out
    }
    const [key, ref] = tag
    if (key === TAG.undef) return undefined
    if (key === TAG.error) return errorFromWire(ref)
    const n = z.number().int().nonnegative().parse(ref)
    switch (key) {
      case TAG.bytes: {
        const b = blobs[n]
        if (!b) throw new Error('a frame names a blob it lacks')
        return b
      }
      case TAG.fn:
        return (...args: unknown[]) => {
          const p = this.request(scope, (k) => ({ t: 'invoke', f: n, k, a: args }))
          p.catch(() => {})
          return p
        }
      case TAG.promise: {
        this.liveAdd(scope)
        const p = new Promise((resolve, reject) => this.promises.set(n, { resolve, reject, scope }))
        p.catch(() => {})
        return p
      }
      case TAG.signal: {
        const ac = new AbortController()
        this.signals.set(n, ac)
        this.scopes.get(scope)?.cleanup.push(() => this.signals.delete(n))
        return ac.signal
      }
      case TAG.iter:
        // not counted live: an argument's iterator is only read while its call runs
        return importedIterable(this.source(n, scope))
      case TAG.stream:
        this.liveAdd(scope)
        return importedStream(this.source(n, scope), () => this.liveDone(scope))
    }
    throw new Error(`unknown value tag ${JSON.stringify(key)}`)
  }

  /** Sends a request built with a fresh reply id and waits for the reply. */
  private request(scope: number, build: (k: number) => Msg): Promise<unknown> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    const k = this.id()
    return new Promise((resolve, reject) => {
      this.waiting.set(k, { resolve, reject, scope })
      this.send(build(k), scope)
    })
  }

  /** The other end's stream or iterator `s`, reached by pulls made for `scope`. */
  private source(s: number, scope: number): RemoteSource {
    return {
      pull: async () => {
        const r = Pulled.parse(await this.request(scope, (k) => ({ t: 'pull', s, k })))
        return r.done ? { done: true, value: undefined } : { done: false, value: r.value }
      },
      cancel: () => {
        if (!this.closedWith) this.send({ t: 'cancel', s }, 0)
      },
    }
  }
}
