// Calls of sandboxes that are about to leave this host (hibernated, migrated): once a final
// checkpoint is asked for, calls already running finish first (for a while), new ones are held
// and then refused with SANDBOX_MOVING, which tells the control plane the call never started and
// can go to wherever the sandbox runs next.
import { AppError } from '@forkbox/protocol'

export class CallGate {
  private readonly running = new Map<string, { n: number; idle: Set<() => void> }>()
  private readonly leaving = new Map<string, Promise<unknown>>()

  private moving(id: string): AppError {
    return new AppError('SANDBOX_MOVING', `sandbox ${id} is moving; the call did not start: retry`, { sandboxId: id })
  }

  /** Runs a call of sandbox `id`; with `count`, a final checkpoint waits for it to end. */
  async run<T>(id: string, fn: () => Promise<T>, count = true): Promise<T> {
    const left = this.leaving.get(id)
    if (left) {
      await left.catch(() => {})
      throw this.moving(id)
    }
    if (!count) return fn()
    const r = this.running.get(id) ?? { n: 0, idle: new Set<() => void>() }
    this.running.set(id, r)
    r.n++
    try {
      return await fn()
    } finally {
      r.n--
      if (r.n === 0) {
        this.running.delete(id)
        for (const f of r.idle) f()
      }
    }
  }

  /**
   * From now on new calls of `id` wait for `gone` (the sandbox leaving this host), then fail with
   * SANDBOX_MOVING. Resolves once the calls under way have ended, or after `maxWaitMs`.
   */
  async close(id: string, gone: Promise<unknown>, maxWaitMs: number): Promise<void> {
    this.leaving.set(id, gone)
    void gone.finally(() => {
      if (this.leaving.get(id) === gone) this.leaving.delete(id)
    })
    const r = this.running.get(id)
    if (!r) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, maxWaitMs)
      function done() {
        clearTimeout(timer)
        r?.idle.delete(done)
        resolve()
      }
      r.idle.add(done)
    })
  }

  /** Whether a call of `id` is under way, or it is leaving this host. */
  busy(id: string): boolean {
    return this.running.has(id) || this.leaving.has(id)
  }

  /** The checkpoint failed: the sandbox stays, calls flow again (held ones included). */
  reopen(id: string): void {
    this.leaving.delete(id)
  }
}
