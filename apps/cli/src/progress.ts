// Renders template build progress during `forkbox up`: bars on a terminal, plain lines otherwise.
import { MultiBar, Presets, type SingleBar } from 'cli-progress'
import type { Output } from './context.ts'
import type { TemplateProgress } from './host.ts'

export interface ProgressReporter {
  update(progress: TemplateProgress): void
  stop(): void
}

export function barReporter(stream: NodeJS.WriteStream): ProgressReporter {
  const multibar = new MultiBar(
    {
      stream,
      format: ' {template} [{bar}] {percentage}% | {phase} {message}',
      hideCursor: true,
      clearOnComplete: false,
    },
    Presets.shades_classic,
  )
  const bars = new Map<string, SingleBar>()
  return {
    update(p) {
      const payload = { template: p.template, phase: p.phase, message: p.message ?? '' }
      let bar = bars.get(p.template)
      if (!bar) {
        bar = multibar.create(100, 0, payload)
        bars.set(p.template, bar)
      }
      if (p.fraction === undefined) bar.update(payload)
      else bar.update(Math.round(p.fraction * 100), payload)
    },
    stop() {
      multibar.stop()
    },
  }
}

const MESSAGE_INTERVAL_MS = 1000

/** One line per phase, per 10% step, and per new message at most once a second. */
export function lineReporter(out: Output, now: () => number = Date.now): ProgressReporter {
  const last = new Map<string, { phase: string; step: number; message: string; atMs: number }>()
  return {
    update(p) {
      const step = p.fraction === undefined ? -1 : Math.floor(p.fraction * 10)
      const message = p.message ?? ''
      const prev = last.get(p.template)
      const changed =
        !prev ||
        prev.phase !== p.phase ||
        step > prev.step ||
        (message !== prev.message && now() - prev.atMs >= MESSAGE_INTERVAL_MS)
      if (!changed) return
      last.set(p.template, {
        phase: p.phase,
        step: Math.max(step, prev?.phase === p.phase ? prev.step : -1),
        message,
        atMs: now(),
      })
      const pct = p.fraction === undefined ? '' : ` ${Math.round(p.fraction * 100)}%`
      out.write(`template ${p.template}: ${p.phase}${pct}${message ? ` - ${message}` : ''}\n`)
    },
    stop() {},
  }
}
