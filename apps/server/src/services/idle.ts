// Which running sandboxes are idle: when a request last touched each, and how many are under way.

export class IdleTracker {
  private readonly activity = new Map<string, { at: number; inFlight: number }>()
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
    let seen = this.activity.get(id)
    if (!seen) {
      seen = { at: Date.now(), inFlight: 0 }
      this.activity.set(id, seen)
    }
    seen.at = Date.now()
    return seen
  }

  forget(id: string): void {
    this.activity.delete(id)
  }

  /**
   * Of `running` (non-persistent ones), those no request has touched for `timeoutMs` and none is
   * under way, with how long they have been idle. A sandbox first seen here starts its clock now.
   */
  idle<S extends { id: string; persistent: boolean }>(running: Iterable<S>, now: number, timeoutMs: number) {
    const out: { sandbox: S; idleMs: number }[] = []
    for (const s of running) {
      if (s.persistent || this.idling.has(s.id)) continue
      const seen = this.activity.get(s.id) ?? this.touch(s.id)
      if (seen.inFlight > 0 || now - seen.at < timeoutMs) continue
      out.push({ sandbox: s, idleMs: now - seen.at })
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
