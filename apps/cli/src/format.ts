// Plain-text rendering for listings: aligned tables and short relative times.

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()
  return `${[headers, ...rows].map(line).join('\n')}\n`
}

/** `42s ago`, `in 5m`, `3h ago`, `2d ago`; the input unchanged when it is not a date. */
export function relativeTime(iso: string, nowMs: number): string {
  const t = Date.parse(iso)
  if (Number.isNaN(t)) return iso
  const seconds = Math.round((t - nowMs) / 1000)
  const abs = Math.abs(seconds)
  const amount =
    abs < 60
      ? `${abs}s`
      : abs < 3600
        ? `${Math.floor(abs / 60)}m`
        : abs < 86400
          ? `${Math.floor(abs / 3600)}h`
          : `${Math.floor(abs / 86400)}d`
  return seconds >= 0 ? `in ${amount}` : `${amount} ago`
}

export function formatPairs(pairs: Record<string, string>): string {
  return Object.entries(pairs)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')
}

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`
}
