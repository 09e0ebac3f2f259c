// Which running sandboxes are idle: when a request last touched each, and how many are under way.

export class IdleTracker {
  /** `shared`: other replicas serve the same sandboxes, so what this one sees is told (`seen`). */
  constructor(private readonly shared = false) {}

  private readonly activity = new Map<string, { at: number; inFlight: number }>()
  /** Touched since the last `seen()`: what this replica tells the others. */
  private readonly touched = new Set<string>()
  /** Sandboxes being hibernated for idleness: not picked again meanwhile. */
  private readonly idling = new Set<string>()

  /** Marks the sandbox busy (the idle reaper leaves it) until the returned release is called. */
  hold(id: string): () => void {
    const seen = this.touch(id)
    seen.inFlight += 1
    let released = false
    return () => {
      if (released) return
      released = true
      seen.inFlight -= 1
      seen.at = Date.now()
    }
  }

  private touch(id: string): { at: number; inFlight: number } {
    if (this.shared) this.touched.add(id)
    let seen = this.activity.get(id)
    if (!seen) {
      seen = { at: Date.now(), inFlight: 0 }
      this.activity.set(id, seen)
    }
    seen.at = Date.now()
    return seen
  }

  /** Sandboxes with a call seen since the last time this was asked, or under way now. */
  seen(): string[] {
    const ids = new Set(this.touched)
    this.touched.clear()
    for (const [id, a] of this.activity) if (a.inFlight > 0) ids.add(id)
    return [...ids]
  }

  forget(id: string): void {
    this.touched.delete(id)
    this.activity.delete(id)
  }

  /**
   * Of `running` (non-persistent ones, unless `persistentToo`), those no request has touched for `timeoutMs` and none is
   * under way, with how long they have been idle. A sandbox first seen here starts its clock now.
   */
  idle<S extends { id: string; persistent: boolean; activeAt?: number | null }>(
    running: Iterable<S>,
    now: number,
    timeoutMs: number,
    opts: { persistentToo?: boolean } = {},
  ) {
    const out: { sandbox: S; idleMs: number }[] = []
    for (const s of running) {
      if ((s.persistent && !opts.persistentToo) || this.idling.has(s.id)) continue
      const seen = this.activity.get(s.id) ?? this.touch(s.id)
      // what other replicas saw counts too (the store's time of the last call seen anywhere)
      const at = Math.max(seen.at, s.activeAt ?? 0)
      if (seen.inFlight > 0 || now - at < timeoutMs) continue
      out.push({ sandbox: s, idleMs: now - at })
    }
    return out
  }

  /** The sandbox is being put away for idleness until `done` settles. */
  putAway(id: string, done: Promise<unknown>): void {
    this.idling.add(id)
    void done.finally(() => {
      this.idling.delete(id)
      this.activity.delete(id)
    })
  }
}
