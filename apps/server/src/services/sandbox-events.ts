// Sandboxes' events: what each went through (created, exec started, hibernated, ...), recorded, read
// back per sandbox, and fed to a key's followers live with no event lost between past and live.
import { AppError, type SandboxEvent, type SandboxEventType } from '@forkbox/protocol'
import type { SandboxStore } from '../store/sandboxes.ts'

export class SandboxEvents {
  constructor(private readonly store: SandboxStore) {}

  /** Another key's sandbox is answered as one that does not exist. */
  private async own(owner: string, id: string): Promise<void> {
    const s = await this.store.get(id)
    if (!s || s.owner !== owner) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${id}`)
  }

  /** A sandbox's own events, oldest first. */
  async events(owner: string, id: string) {
    await this.own(owner, id)
    return this.store.events(id)
  }

  /** Records an event on a sandbox of `owner` (e.g. an exec starting or ending). */
  async record(id: string, type: SandboxEventType, detail?: string): Promise<void> {
    await this.store.event(id, type, detail)
  }

  /** Past events of `owner`'s sandboxes (after `since`) and, with `onLive`, each new one as it happens. */
  async feed(
    owner: string,
    filter: { since?: number; sandboxId?: string; types?: string[]; limit: number },
    onLive?: (e: SandboxEvent) => void,
  ): Promise<{ past: SandboxEvent[]; stop: () => void }> {
    if (filter.sandboxId) await this.own(owner, filter.sandboxId)
    if (!onLive) return { past: await this.store.eventsOf(owner, filter), stop: () => {} }
    // subscribed before the read: what happens meanwhile is held, then passed on after the past
    // (skipping what the read already returned), so no event falls between them
    let held: SandboxEvent[] | null = []
    let last = filter.since ?? 0
    const listener = (e: SandboxEvent) => {
      if (e.owner !== owner) return
      if (filter.sandboxId && e.sandboxId !== filter.sandboxId) return
      if (filter.types?.length && !filter.types.includes(e.type)) return
      if (held) held.push(e)
      else if (e.id > last) onLive(e)
    }
    this.store.bus.on('event', listener)
    const stop = () => this.store.bus.off('event', listener)
    try {
      const past = await this.store.eventsOf(owner, filter)
      last = past.at(-1)?.id ?? last
      const pending = held
      held = null
      queueMicrotask(() => {
        for (const e of pending) if (e.id > last) onLive(e)
      })
      return { past, stop }
    } catch (err) {
      stop()
      throw err
    }
  }

  pruneEvents(before: Date): Promise<number> {
    return this.store.pruneEvents(before)
  }
}
