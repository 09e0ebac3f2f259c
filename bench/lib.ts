// What every bench script shares: percentiles, timing loops, the report, and a throwaway host.
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { defaultAgentConfig } from '@forkbox/agent'
import { type Host, startHost } from '@forkbox/host'

export const N = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 50

export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN
}

/** Times `fn` n times after `warmup` untimed calls. */
export async function measure(n: number, fn: () => Promise<unknown>, warmup = 3): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn()
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn()
    out.push(performance.now() - t0)
  }
  return out
}

/** Runs `fn` (which times itself) n times, pausing between runs (e.g. for a pool refill). */
export async function timed(n: number, fn: () => Promise<number>, pauseMs = 0): Promise<number[]> {
  const xs: number[] = []
  for (let i = 0; i < n; i++) {
    if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs))
    xs.push(await fn())
  }
  return xs
}

const rows: [string, number[]][] = []

export function report(name: string, xs: number[]): void {
  rows.push([name, xs])
  console.error(
    `${name.padEnd(52)} p50 ${pct(xs, 50).toFixed(2).padStart(8)} ms   p99 ${pct(xs, 99).toFixed(2).padStart(8)} ms   (n=${xs.length})`,
  )
}

/** The whole report as JSON on stdout (the lines above go to stderr as they come). */
export function printSummary(): void {
  const summary = rows.map(([k, xs]) => [
    k,
    { p50: +pct(xs, 50).toFixed(2), p99: +pct(xs, 99).toFixed(2), n: xs.length },
  ])
  console.log(JSON.stringify(Object.fromEntries(summary), null, 2))
}

let hosts = 0

/** A host with its own data dir, runsc root, cgroup and address block, all removed again by `close()`. */
export async function benchHost(
  name: string,
  poolSize: number,
  options: { freezeAfterSeconds?: number; prebuild?: string[]; maxSandboxes?: number; poolMax?: number } = {},
): Promise<Host & { conn: { url: string; apiKey: string } }> {
  const tag = `forkbox-bench-${name}-${process.pid}`
  // FORKBOX_BENCH_DIR: where the bench host's data (and so its snapshot images) live
  const dataDir = `${process.env.FORKBOX_BENCH_DIR ?? '/tmp'}/${tag}`
  const host = await startHost({
    port: 0,
    dataDir,
    templatesDir: process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir,
    runscStateDir: `/run/${tag}`,
    cgroupParent: tag,
    logLevel: 'warn',
    prebuild: ['base'],
    poolSize,
    networkSubnet: `10.${230 + (hosts++ % 20)}.0.0/16`,
    ...options,
  })
  return {
    ...host,
    conn: { url: host.url, apiKey: host.bootstrapKey as string },
    async close() {
      await host.close()
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(host.config.runscStateDir, { recursive: true, force: true })
    },
  }
}

/**
 * The platform in a process of its own, as users run it: what the client side of a call costs
 * (the SDK, parsing, the bench's loop) is this process's CPU, not the server's. The script runs
 * itself again with `--serve`, which starts `benchHost(name, poolSize)` and waits.
 */
export async function serverProcess(
  script: string,
  name: string,
  poolSize: number,
  options: Parameters<typeof benchHost>[2] = {},
): Promise<{ conn: { url: string; apiKey: string }; close(): Promise<void> }> {
  if (process.argv.includes('--serve')) {
    const host = await benchHost(name, poolSize, options)
    process.stdout.write(`${JSON.stringify(host.conn)}\n`)
    process.stdin.resume()
    await new Promise((r) => process.stdin.once('end', r))
    await host.close()
    process.exit(0)
  }
  const child = spawn(process.execPath, [...process.execArgv, script, ...process.argv.slice(2), '--serve'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(String(d)))
    child.once('exit', (code) => reject(new Error(`the bench server exited (${code})`)))
  })
  return {
    conn: JSON.parse(line),
    async close() {
      child.stdin.end()
      await new Promise((r) => child.once('close', r))
    },
  }
}
