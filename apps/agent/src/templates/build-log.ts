// A build's step-by-step log: output split into lines, an instruction's text, the failing step's tail.
import type { BuildLogEvent, BuildLogLine } from '@forkbox/protocol'

export type BuildLogSink = (event: BuildLogEvent) => void

/** Longest line kept in an event; a longer one is cut (a progress bar redrawn with `\r` forever). */
const MAX_LINE_CHARS = 4096
const TAIL_LINES = 40

/** Splits a stream's chunks into lines (a chunk may end mid-line, or mid-character). */
export class LineSplitter {
  private readonly decoder = new TextDecoder()
  private pending = ''

  push(chunk: Uint8Array): string[] {
    this.pending += this.decoder.decode(chunk, { stream: true })
    const parts = this.pending.split(/\r?\n|\r/)
    this.pending = parts.pop() ?? ''
    if (this.pending.length > MAX_LINE_CHARS) {
      parts.push(this.pending)
      this.pending = ''
    }
    return parts.map((l) => l.slice(0, MAX_LINE_CHARS))
  }

  end(): string[] {
    const rest = this.pending + this.decoder.decode()
    this.pending = ''
    return rest ? [rest.slice(0, MAX_LINE_CHARS)] : []
  }
}

/** The instruction at 1-based `line` as written, continuation lines joined (for the log, capped). */
export function instructionText(dockerfile: string | undefined, line: number): string {
  if (!dockerfile) return `line ${line}`
  const lines = dockerfile.split(/\r?\n/)
  let text = ''
  for (let i = line - 1; i < lines.length; i++) {
    const l = lines[i] ?? ''
    if (!l.trimEnd().endsWith('\\')) {
      text += l.trim()
      break
    }
    text += `${l.trimEnd().slice(0, -1).trim()} `
    if (text.length > 500) break
  }
  return text.length > 500 ? `${text.slice(0, 497)}...` : text
}

/** One step's output as events, and the last lines of it (what a failure reports). */
export class StepOutput {
  private readonly streams = { stdout: new LineSplitter(), stderr: new LineSplitter() }
  private readonly lines: string[] = []

  constructor(
    private readonly step: number,
    private readonly emit: BuildLogSink,
  ) {}

  push(stream: 'stdout' | 'stderr', chunk: Uint8Array): void {
    for (const line of this.streams[stream].push(chunk)) this.line(stream, line)
  }

  end(): void {
    for (const stream of ['stdout', 'stderr'] as const)
      for (const line of this.streams[stream].end()) this.line(stream, line)
  }

  tail(): string {
    return this.lines.join('\n')
  }

  private line(stream: 'stdout' | 'stderr', line: string): void {
    this.lines.push(line)
    if (this.lines.length > TAIL_LINES) this.lines.shift()
    this.emit({ type: 'output', step: this.step, stream, line })
  }
}

/** A build event as a log line; steps are numbered from 1 in the log. */
export function eventLine(e: BuildLogEvent): BuildLogLine {
  switch (e.type) {
    case 'step':
      return {
        step: e.step + 1,
        stream: 'system',
        message: `#${e.step + 1} ${e.instruction}${e.cached ? ' (cached)' : ''}`,
      }
    case 'output':
      return { step: e.step + 1, stream: e.stream, message: e.line }
    case 'step_done':
      return {
        step: e.step + 1,
        stream: 'system',
        message: `#${e.step + 1} done in ${(e.durationMs / 1000).toFixed(1)} s (exit ${e.exitCode})`,
      }
    case 'phase':
      return { stream: 'system', message: `${e.phase}: ${e.message}` }
  }
}
