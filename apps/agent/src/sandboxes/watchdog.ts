// The agent's watch over the sandboxes it runs, so that no call waits on one forever:
// - heartbeat: each running guest is pinged now and then (and at once when one of its requests
//   passes its deadline); a guest that does not answer is reported (the sandbox is errored
//   `guest_unresponsive` and stopped), which fails every call waiting on it;
// - OOM sweeps: when the sandbox's cgroup counts a new OOM kill, the guest is asked to end the
//   processes the kill left wedged (guest oom.py); one that SIGKILL cannot end (gVisor spins it in
//   the Sentry) takes the sandbox down as out of memory: its calls fail at once, not hang.
// Frozen sandboxes (idle, no CPU) and ones being checkpointed are left alone.
import { oomKills } from '../runtime/cgroups.ts'
import type { LiveSandbox } from './live-sandbox.ts'

export interface WatchdogOptions {
  /** How often sandboxes are looked at (their OOM counters read). */
  intervalMs: number
  /** A guest heard from longer ago than this is pinged. */
  heartbeatMs: number
  /** A guest that does not answer a ping within this is unresponsive. */
  pingDeadlineMs: number
}

export const WATCHDOG_DEFAULTS: WatchdogOptions = { intervalMs: 1000, heartbeatMs: 10_000, pingDeadlineMs: 30_000 }

interface Watched {
  oomKills: number
  lastPing: number
  pinging: boolean
  sweeping: boolean
  /** More OOM kills were counted during a sweep: another follows it. */
  sweepAgain: boolean
}

export class Watchdog {
  private readonly watched = new WeakMap<LiveSandbox, Watched>()
  private timer: NodeJS.Timeout | null = null

  constructor(
    private readonly sandboxes: () => Iterable<LiveSandbox>,
    /** The guest of `sbx` does not answer: report it and stop the sandbox. */
    private readonly onUnresponsive: (sbx: LiveSandbox, message: string) => void,
    /** The OOM killer left processes in `sbx` that nothing can end: report it and stop the sandbox. */
    private readonly onWedged: (sbx: LiveSandbox, message: string) => void,
    private readonly log: (message: string) => void,
    private readonly opts: WatchdogOptions = WATCHDOG_DEFAULTS,
  ) {}

  start(): void {
    if (this.timer) return
    this.timer = setInterval(() => this.tick(), this.opts.intervalMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  private watchable(sbx: LiveSandbox): boolean {
    return !sbx.stopping && !sbx.starting && !sbx.frozen && sbx.checkpointing === 0 && !sbx.conn.failed
  }

  private stateOf(sbx: LiveSandbox): Watched {
    let w = this.watched.get(sbx)
    if (!w) {
      w = { oomKills: 0, lastPing: performance.now(), pinging: false, sweeping: false, sweepAgain: false }
      this.watched.set(sbx, w)
    }
    return w
  }

  tick(now = performance.now()): void {
    for (const sbx of this.sandboxes()) {
      if (!this.watchable(sbx)) continue
      const w = this.stateOf(sbx)
      const kills = oomKills(sbx.cgroup)
      if (kills > w.oomKills) {
        w.oomKills = kills
        if (w.sweeping) w.sweepAgain = true
        else void this.sweep(sbx, w)
      }
      if (!w.pinging && now - w.lastPing >= this.opts.heartbeatMs) void this.ping(sbx, w)
    }
  }

  /** A request of `sbx` passed its deadline: is its guest still there? */
  check(sbx: LiveSandbox): void {
    const w = this.stateOf(sbx)
    if (!w.pinging && this.watchable(sbx)) void this.ping(sbx, w)
  }

  private async ping(sbx: LiveSandbox, w: Watched): Promise<void> {
    w.pinging = true
    try {
      await sbx.guest.ping(this.opts.pingDeadlineMs)
    } catch (err) {
      // frozen or stopped meanwhile, or its connection failed for a reason already reported
      if (sbx.stopping || sbx.frozen || sbx.conn.failed) return
      const seconds = Math.round(this.opts.pingDeadlineMs / 1000)
      this.onUnresponsive(sbx, `the sandbox's guest daemon did not answer for ${seconds} s (${describe(err)})`)
    } finally {
      w.pinging = false
      w.lastPing = performance.now()
    }
  }

  private async sweep(sbx: LiveSandbox, w: Watched): Promise<void> {
    w.sweeping = true
    try {
      do {
        w.sweepAgain = false
        const { killed, stuck } = await sbx.guest.oomSweep()
        this.log(
          `${sbx.id}: the host's OOM killer acted (${w.oomKills} kills so far)${killed.length > 0 ? `; killed wedged processes ${killed.join(', ')}` : ''}`,
        )
        if (stuck.length > 0) {
          this.onWedged(
            sbx,
            `the sandbox ran out of memory: the host's OOM killer left process${stuck.length > 1 ? 'es' : ''} ${stuck.join(', ')} wedged, past ending; the sandbox was stopped`,
          )
          return
        }
      } while (w.sweepAgain && this.watchable(sbx))
    } catch (err) {
      if (!sbx.stopping && !sbx.conn.failed) this.log(`${sbx.id}: OOM sweep failed: ${describe(err)}`)
    } finally {
      w.sweeping = false
    }
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
