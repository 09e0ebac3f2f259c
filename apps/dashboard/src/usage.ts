// A sandbox's usage as the dashboard shows it: the metrics endpoint's samples (one every 5 s),
// polled while shown, and the rates between them.
import type { Sandbox, SandboxMetrics } from '@forkbox/sdk'
import { useEffect, useState } from 'preact/hooks'

type Sample = SandboxMetrics['samples'][number]

/** Per-interval rates from cumulative samples: time (s), CPU %, memory MiB, network KiB/s in and out. */
export function series(samples: Sample[]): [number[], number[], number[], number[], number[]] {
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

/** The sandbox's metrics, fetched now and every 5 s; a failed fetch keeps the last ones. */
export function useMetrics(sandbox: Sandbox | null): SandboxMetrics | null {
  const [metrics, setMetrics] = useState<SandboxMetrics | null>(null)
  useEffect(() => {
    if (!sandbox) return
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
  return metrics
}
