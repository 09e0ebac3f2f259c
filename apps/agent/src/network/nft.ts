// The agent's one long-lived `nft -i`: each rule change goes to it as a one-line batch (one
// transaction), instead of a process per change.
import { type ChildProcessByStdio, execFile, spawn } from 'node:child_process'
import { Socket } from 'node:net'
import type { Readable, Writable } from 'node:stream'

export interface NftOptions {
  /** The nft binary. */
  nftPath?: string
  /** How long one batch may take before the writer is given up on (and replaced). */
  timeoutMs?: number
  log?(message: string): void
}

const DEFAULT_TIMEOUT_MS = 10_000

/** The writer went away (died, hung) before saying how a batch went: its outcome is unknown. */
class WriterLost extends Error {}

type Child = ChildProcessByStdio<Writable, Readable, null>

interface Waiting {
  marker: string
  settle(err: Error | null, output?: string): void
}

/**
 * A batch as one line: nft -i runs each line it reads as one transaction, and a newline inside a
 * table or chain block is a statement separator, as `;` is.
 */
export function oneLine(script: string): string {
  // a comment would swallow the rest of the batch
  if (script.includes('#')) throw new Error(`nft batch holds a '#': ${script}`)
  return script.trim().split('\n').join(' ; ')
}

/** Runs one batch in a process of its own: the fallback when the writer is lost mid-batch. */
function nftOnce(nftPath: string, script: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(nftPath, ['-f', '-'], { timeout: timeoutMs }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`nft failed: ${stderr.trim() || err.message}\n${script}`))
      else resolve()
    })
    child.stdin?.end(script)
  })
}

/**
 * Batches run one at a time, in the order given. nft -i prints nothing for a batch that succeeds,
 * so after each batch a line that is not nft (a syntax error by design) is sent: its echo in the
 * error output marks where that batch's output ends. Every batch this agent sends is safe to run
 * twice (flush-then-add, or deletes whose failure the caller ignores), so a batch whose outcome is
 * unknown (the writer died or hung) is run again through a one-shot `nft -f`, itself one
 * transaction: a policy is in force wholly or not at all.
 */
export class NftWriter {
  private child: Child | null = null
  private output = ''
  private waiting: Waiting | null = null
  private queue: Promise<unknown> = Promise.resolve()
  private seq = 0
  private readonly nftPath: string
  private readonly timeoutMs: number

  constructor(private readonly opts: NftOptions = {}) {
    this.nftPath = opts.nftPath ?? 'nft'
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  }

  /** Runs `script` (nft statements, one per line) as one transaction; rejects with nft's message if it fails. */
  run(script: string): Promise<void> {
    const line = oneLine(script)
    const p = this.queue.then(() => this.runNow(line, script))
    this.queue = p.catch(() => {})
    return p
  }

  private async runNow(line: string, script: string): Promise<void> {
    let output: string
    try {
      output = await this.exchange(line)
    } catch (err) {
      if (!(err instanceof WriterLost)) throw err
      this.opts.log?.(`nft: ${err.message}; the batch goes through a one-shot nft, a new writer starts on the next`)
      return nftOnce(this.nftPath, script, this.timeoutMs)
    }
    if (/^Error:/m.test(output)) throw new Error(`nft failed: ${output.trim()}\n${script}`)
  }

  private start(): Child {
    // one stream for both: an error and the marker after it arrive in the order nft wrote them
    const child = spawn('/bin/sh', ['-c', 'exec "$0" -i 2>&1', this.nftPath], { stdio: ['pipe', 'pipe', 'ignore'] })
    this.output = ''
    // an idle writer never keeps the process alive (a host that failed to start must still exit);
    // a batch in flight does, through its timeout
    child.unref()
    for (const pipe of [child.stdin, child.stdout]) if (pipe instanceof Socket) pipe.unref()
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      if (this.child !== child) return
      this.output += chunk
      this.deliver()
    })
    // a write to a writer that just died: its exit settles the batch
    child.stdin.on('error', () => {})
    child.on('exit', (code, signal) => this.lost(child, `nft -i exited (${signal ?? code})`))
    child.on('error', (err) => this.lost(child, `nft -i: ${err.message}`))
    this.child = child
    return child
  }

  private lost(child: Child, why: string): void {
    if (this.child !== child) return
    this.child = null
    child.kill('SIGKILL')
    const w = this.waiting
    this.waiting = null
    w?.settle(new WriterLost(why))
  }

  /** Completes the waiting batch once its marker's echo (and the line after it) has arrived. */
  private deliver(): void {
    const w = this.waiting
    if (!w) return
    const lines = this.output.split('\n')
    const at = lines.indexOf(w.marker)
    // the marker's own report is three lines: the error, the marker, a caret line
    if (at < 0 || at + 1 >= lines.length - 1) return
    this.output = lines.slice(at + 2).join('\n')
    this.waiting = null
    w.settle(null, lines.slice(0, Math.max(0, at - 1)).join('\n'))
  }

  private exchange(line: string): Promise<string> {
    const child = this.child ?? this.start()
    const marker = `forkbox-batch-end-${++this.seq}`
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.lost(child, `nft -i gave no answer in ${this.timeoutMs} ms`), this.timeoutMs)
      this.waiting = {
        marker,
        settle: (err, output) => {
          clearTimeout(timer)
          if (err) reject(err)
          else resolve(output ?? '')
        },
      }
      child.stdin.write(`${line}\n${marker}\n`)
    })
  }

  /** Lets the writer finish what it was given, then ends it. */
  async close(): Promise<void> {
    await this.queue
    const child = this.child
    if (!child) return
    this.child = null
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.stdin.end()
    const timer = setTimeout(() => child.kill('SIGKILL'), this.timeoutMs)
    await exited
    clearTimeout(timer)
  }
}
