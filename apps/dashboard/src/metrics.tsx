// Live CPU, memory and network charts (uPlot) from the metrics endpoint, which samples every 5 s.
import type { Sandbox, SandboxMetrics } from '@forkbox/sdk'
import { useEffect, useRef, useState } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'

type Sample = SandboxMetrics['samples'][number]

/** Per-interval rates from cumulative samples: CPU %, memory MiB, network KiB/s in and out. */
function series(samples: Sample[]): [number[], number[], number[], number[], number[]] {
  const t: number[] = []
  const cpu: number[] = []
  const mem: number[] = []
  const rx: number[] = []
  const tx: number[] = []
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1] as Sample
    const b = samples[i] as Sample
    const dt = (Date.parse(b.at) - Date.parse(a.at)) / 1000
    if (dt <= 0) continue
    t.push(Date.parse(b.at) / 1000)
    cpu.push(Math.max(0, ((b.cpuSeconds - a.cpuSeconds) / dt) * 100))
    mem.push(b.memoryBytes / 1024 ** 2)
    rx.push(Math.max(0, (b.networkRxBytes - a.networkRxBytes) / dt / 1024))
    tx.push(Math.max(0, (b.networkTxBytes - a.networkTxBytes) / dt / 1024))
  }
  return [t, cpu, mem, rx, tx]
}

function Chart({ title, data, labels }: { title: string; data: number[][]; labels: string[] }) {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  useEffect(() => {
    if (!box.current) return
    const colors = ['#1f5fd6', '#c2410c']
    plot.current = new uPlot(
      {
        width: Math.max(200, box.current.clientWidth),
        height: 140,
        legend: { show: true },
        series: [{}, ...labels.map((label, i) => ({ label, stroke: colors[i], width: 1.5 }))],
        axes: [{}, { size: 50 }],
      },
      data as uPlot.AlignedData,
      box.current,
    )
    // follow the box's width (a phone turned, a window resized)
    const el = box.current
    const observer = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 140 }),
    )
    observer.observe(el)
    return () => {
      observer.disconnect()
      plot.current?.destroy()
    }
  }, [labels])
  useEffect(() => plot.current?.setData(data as uPlot.AlignedData), [data])
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title} over time`} />
    </figure>
  )
}

const CPU = ['CPU %']
const MEMORY = ['MiB']
const NETWORK = ['in KiB/s', 'out KiB/s']

export function MetricsCharts({ sandbox }: { sandbox: Sandbox }) {
  const [metrics, setMetrics] = useState<SandboxMetrics | null>(null)
  useEffect(() => {
    let stop = false
    const tick = async () => {
      try {
        const m = await sandbox.getMetrics()
        if (!stop) setMetrics(m)
      } catch {
        // a sandbox that stopped has no new samples: keep the last ones
      }
    }
    void tick()
    const timer = setInterval(tick, 5000)
    return () => {
      stop = true
      clearInterval(timer)
    }
  }, [sandbox])
  if (!metrics) return null
  const [t, cpu, mem, rx, tx] = series(metrics.samples)
  const disk =
    metrics.diskBytes === null
      ? ''
      : `, disk ${(metrics.diskBytes / 1024 ** 2).toFixed(0)} of ${(metrics.diskLimitBytes / 1024 ** 2).toFixed(0)} MiB`
  return (
    <section aria-label="usage">
      <h2>
        Usage <small>{`${metrics.samples.length} samples${disk}`}</small>
      </h2>
      {t.length < 2 ? (
        <p class="muted">Collecting samples (one every 5 s)…</p>
      ) : (
        <div class="charts">
          <Chart title="CPU" data={[t, cpu]} labels={CPU} />
          <Chart title="Memory" data={[t, mem]} labels={MEMORY} />
          <Chart title="Network" data={[t, rx, tx]} labels={NETWORK} />
        </div>
      )}
    </section>
  )
}
