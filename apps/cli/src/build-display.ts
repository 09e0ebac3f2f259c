// Shows a template build's log as it comes: on a terminal one live line (the current step's newest
// line, a spinner and the step's time), each finished step kept as a line, and of the build's own
// lines between steps (pulling, baking, ...) the last one; elsewhere every line.
import type { BuildLogEntry } from '@forkbox/sdk'
import type { Output } from './context.ts'

export interface BuildDisplay {
  line(entry: BuildLogEntry): void
  /** Ends the display; on a terminal a failed build then shows the last lines of its last step (the one that failed). */
  finish(failed: boolean): void
}

/** How many of a failing step's last lines a terminal display shows. */
export const FAILED_STEP_TAIL_LINES = 20
const FRAMES = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'
const TICK_MS = 120

/** `[step N] message`, or the message alone for the build's own lines. */
export function formatLogLine(entry: BuildLogEntry): string {
  return entry.step === null ? entry.message : `[step ${entry.step}] ${entry.message}`
}

export function plainDisplay(out: Output): BuildDisplay {
  return {
    line: (entry) => out.write(`${formatLogLine(entry)}\n`),
    finish() {},
  }
}

/** The live display on a terminal; `now` gives milliseconds. */
export function liveDisplay(stream: NodeJS.WriteStream, now: () => number): BuildDisplay {
  /** undefined until the first line: the build's own lines are the `null` step. */
  let step: number | null | undefined
  let startedMs = now()
  let latest = ''
  let frame = 0
  let lastStep: number | null = null
  const tails = new Map<number | null, BuildLogEntry[]>()
  const label = () => (step === null ? 'build' : `step ${step}`)
  const seconds = () => `${((now() - startedMs) / 1000).toFixed(1)}s`
  const fit = (text: string) => {
    const width = Math.max(20, (stream.columns ?? 80) - 1)
    return text.length > width ? `${text.slice(0, width - 1)}…` : text
  }
  const oneLine = () => latest.replace(/\s+/g, ' ').trim()
  const render = () => {
    if (step === undefined) return
    stream.write(`\r\x1b[2K${fit(`${FRAMES[frame % FRAMES.length]} ${label()} (${seconds()}) ${oneLine()}`)}`)
  }
  /** A step stays as `✓ step N (time)`; a stretch of the build's own lines as its last line. */
  const endStep = (failed: boolean) => {
    if (step === undefined) return
    const mark = failed ? '✗' : step === null ? ' ' : '✓'
    stream.write(`\r\x1b[2K${fit(step === null ? `${mark} ${oneLine()}` : `${mark} ${label()} (${seconds()})`)}\n`)
  }
  const timer = setInterval(() => {
    frame++
    render()
  }, TICK_MS)
  timer.unref()
  return {
    line(entry) {
      if (entry.step !== step) {
        endStep(false)
        step = entry.step
        startedMs = now()
      }
      if (entry.step !== null) lastStep = entry.step
      const tail = tails.get(entry.step) ?? []
      tail.push(entry)
      if (tail.length > FAILED_STEP_TAIL_LINES) tail.shift()
      tails.set(entry.step, tail)
      latest = entry.message
      render()
    },
    finish(failed) {
      clearInterval(timer)
      endStep(failed)
      if (!failed) return
      const tail = tails.get(lastStep) ?? []
      if (tail.length === 0) return
      stream.write(`the last lines of ${lastStep === null ? 'the build' : `step ${lastStep}`}:\n`)
      for (const e of tail) stream.write(`  ${formatLogLine(e)}\n`)
    },
  }
}
