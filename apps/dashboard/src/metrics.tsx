// Live CPU, memory and network charts (uPlot) from the metrics endpoint, which samples every 5 s.
import type { Sandbox } from '@forkbox/sdk'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { AXIS_FONT, axisWidth, tickLabels, valueRange } from './axis.ts'
import { series, useMetrics } from './usage.ts'

function Chart({ title, data, labels }: { title: string; data: number[][]; labels: string[] }) {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  useEffect(() => {
    if (!box.current) return
    const el = box.current
    const colors = ['#1f5fd6', '#c2410c']
    plot.current = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height: 140,
        legend: { show: true },
        series: [{}, ...labels.map((label, i) => ({ label, stroke: colors[i], width: 1.5 }))],
        scales: { y: { range: (_u, min, max) => valueRange(min, max) } },
        axes: [
          {},
          {
            font: AXIS_FONT,
            size: (_u, values) => axisWidth(values),
            values: (_u, ticks, _axis, _space, step) => {
              const shown = tickLabels(ticks, step)
              // what the canvas draws, readable by a test or a script
              el.dataset.yLabels = shown.join(' ')
              return shown
            },
          },
        ],
      },
      data as uPlot.AlignedData,
      el,
    )
    // follow the box's width (a phone turned, a window resized)
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
  const metrics = useMetrics(sandbox)
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
