// CPU and memory of one running sandbox as two small lines in its list row, from the metrics
// endpoint's 5 s samples (the last 24, two minutes).
import { Sandbox } from '@forkbox/sdk'
import { useEffect, useState } from 'preact/hooks'
import type { Session } from './session.ts'
import { series, useMetrics } from './usage.ts'

function Line({ values, label, max }: { values: number[]; label: string; max: number }) {
  const w = 60
  const h = 18
  const top = Math.max(max, ...values, 1e-9)
  const step = values.length > 1 ? w / (values.length - 1) : w
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(h - (v / top) * h).toFixed(1)}`).join(' ')
  return (
    <svg class="spark" width={w} height={h} role="img" aria-label={label}>
      <title>{label}</title>
      <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  )
}

export function Sparklines({ id, session }: { id: string; session: Session }) {
  const [sandbox, setSandbox] = useState<Sandbox | null>(null)
  useEffect(() => {
    let current = true
    Sandbox.connect(id, session.conn).then(
      (sbx) => current && setSandbox(sbx),
      () => {},
    )
    return () => {
      current = false
    }
  }, [id, session])
  const metrics = useMetrics(sandbox)
  // the last 24 intervals: two minutes
  const [, cpu, mem] = series(metrics?.samples.slice(-25) ?? [])
  if (cpu.length === 0) return <span class="muted">…</span>
  return (
    <span class="sparks">
      <Line values={cpu} max={100} label={`CPU ${Math.round(cpu.at(-1) ?? 0)}%`} />
      <Line values={mem} max={0} label={`memory ${Math.round(mem.at(-1) ?? 0)} MiB`} />
    </span>
  )
}
