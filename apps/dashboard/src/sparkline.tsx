// CPU and memory of one running sandbox as two small lines in its list row, from the metrics
// endpoint's 5 s samples (the last 24, two minutes).
import { Sandbox, type SandboxMetrics } from '@forkbox/sdk'
import { useEffect, useState } from 'preact/hooks'
import type { Session } from './session.ts'

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
  const [metrics, setMetrics] = useState<SandboxMetrics | null>(null)
  useEffect(() => {
    let stop = false
    let timer: ReturnType<typeof setInterval> | undefined
    Sandbox.connect(id, session.conn).then(
      (sbx) => {
        const tick = () =>
          sbx.getMetrics().then(
            (m) => !stop && setMetrics(m),
            () => {},
          )
        void tick()
        timer = setInterval(tick, 5000)
      },
      () => {},
    )
    return () => {
      stop = true
      clearInterval(timer)
    }
  }, [id, session])
  const samples = metrics?.samples.slice(-25) ?? []
  if (samples.length < 2) return <span class="muted">…</span>
  const cpu: number[] = []
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]
    const b = samples[i]
    if (!a || !b) continue
    const dt = (Date.parse(b.at) - Date.parse(a.at)) / 1000
    cpu.push(dt > 0 ? Math.max(0, ((b.cpuSeconds - a.cpuSeconds) / dt) * 100) : 0)
  }
  const mem = samples.slice(1).map((s) => s.memoryBytes / 1024 ** 2)
  return (
    <span class="sparks">
      <Line values={cpu} max={100} label={`CPU ${Math.round(cpu.at(-1) ?? 0)}%`} />
      <Line values={mem} max={0} label={`memory ${Math.round(mem.at(-1) ?? 0)} MiB`} />
    </span>
  )
}
