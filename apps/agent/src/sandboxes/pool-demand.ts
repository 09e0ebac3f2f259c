// How many warm sandboxes a template's pool should hold: what its recent creates called for,
// between the configured floor and ceiling, within the memory the pools may take.

/** A template's creates over the last while (times in ms), and the peak rate they show. */
export class Demand {
  private readonly times: number[] = []

  constructor(
    /** The burst width: the most creates within this long is the peak. */
    private readonly windowMs = 10_000,
    /** How long a peak is remembered: the pool shrinks back this long after the last burst. */
    private readonly historyMs = 120_000,
  ) {}

  record(now = Date.now()): void {
    this.times.push(now)
    this.prune(now)
  }

  /** The most creates within any `windowMs` of the remembered history. */
  peak(now = Date.now()): number {
    this.prune(now)
    let best = 0
    for (let lo = 0, hi = 0; hi < this.times.length; hi++) {
      while ((this.times[hi] as number) - (this.times[lo] as number) >= this.windowMs) lo++
      best = Math.max(best, hi - lo + 1)
    }
    return best
  }

  private prune(now: number): void {
    let drop = 0
    while (drop < this.times.length && now - (this.times[drop] as number) > this.historyMs) drop++
    if (drop) this.times.splice(0, drop)
  }
}

/** The size a pool aims at: the recent peak, never below `floor` nor above `ceiling`. */
export function poolTarget(peak: number, floor: number, ceiling: number): number {
  return Math.max(floor, Math.min(ceiling, peak))
}

/**
 * Whether one more pooled sandbox fits the pools' memory budget: each costs what the pooled ones
 * hold now on average (their cgroups), or `fallbackBytes` before any is measured. A pool below
 * its floor always grows.
 */
export function fitsBudget(opts: {
  pooled: number
  measuredBytes: number[]
  budgetBytes: number
  fallbackBytes: number
  belowFloor: boolean
}): boolean {
  if (opts.belowFloor) return true
  const each = opts.measuredBytes.length
    ? opts.measuredBytes.reduce((a, b) => a + b, 0) / opts.measuredBytes.length
    : opts.fallbackBytes
  return (opts.pooled + 1) * each <= opts.budgetBytes
}
