// The value axis of the usage charts: a range that never shrinks to a sliver around a flat series,
// and tick labels with the decimals their step needs, the axis as wide as its longest label.

/** The narrowest range a chart shows (in its unit: %, MiB, KiB/s): a flat line sits in its middle. */
export const MIN_SPAN = 1

/** The y range for data from `min` to `max`: 10% padding, at least `minSpan` wide, never below 0. */
export function valueRange(min: number | null, max: number | null, minSpan = MIN_SPAN): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, minSpan]
  const pad = Math.max((max - min) * 0.1, (minSpan - (max - min)) / 2)
  const low = Math.max(0, min - pad)
  return [low, Math.max(max + pad, low + minSpan)]
}

/** How many decimals write `step` exactly (0.25 → 2, 5 → 0), at most 6. */
function decimalsOf(step: number): number {
  for (let d = 0; d < 6; d++) {
    const scaled = step * 10 ** d
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return d
  }
  return 6
}

/** Tick labels `step` apart, each written in full (135.25, never a cut 5.25), all with the same decimals. */
export function tickLabels(ticks: readonly number[], step: number): string[] {
  const decimals = step > 0 && Number.isFinite(step) ? decimalsOf(step) : 0
  return ticks.map((v) => v.toFixed(decimals))
}

/** The axis labels' font, set on the axis and measured here, so the width fits what is drawn. */
export const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", sans-serif'

let measurer: CanvasRenderingContext2D | null = null

/** The axis' width in CSS px: its longest label, the tick (10) and the gap (5), and a little air. */
export function axisWidth(labels: readonly (string | null)[] | null): number {
  measurer ??= document.createElement('canvas').getContext('2d')
  if (!measurer) return 60
  measurer.font = AXIS_FONT
  const widest = Math.max(0, ...(labels ?? []).map((l) => (l ? (measurer?.measureText(l).width ?? 0) : 0)))
  return Math.ceil(widest) + 10 + 5 + 6
}
