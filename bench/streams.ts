// Streams: MB/s of 100 MB moving end to end through the SDK — streamed exec output (onStdout), a
// background process's output, a terminal's output, file write and read — each next to what the
// same bytes cost without forkbox in the way: the command inside gVisor writing to /dev/null, and
// on the host through a plain pipe to this process. Not a test.
//   node --import tsx bench/streams.ts [--iterations N] [--mb M] [--only TEXT]
import { spawn } from 'node:child_process'
import { Sandbox } from '@forkbox/sdk'
import { pct, serverProcess } from './lib.ts'

const MB = Number(process.argv[process.argv.indexOf('--mb') + 1]) || 100
const RUNS = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 3
const BYTES = MB * 1_000_000
/** `--only TEXT`: just the rows whose name holds TEXT (the baselines always run). */
const ONLY = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined
/**
 * One process writing printable bytes (a NUL would be escaped six times over in JSON) in 1 MiB
 * writes: a shell pipeline would measure gVisor's pipes between its processes (`yes | head`: ~90 MB/s).
 */
const PRODUCE = `python3 -c 'import sys; b = b"0123456789abcdef" * 65536; w = sys.stdout.buffer.write; [w(b) for _ in range(${BYTES} // len(b))]; w(b[: ${BYTES} % len(b)])'`

const rows: Record<string, { p50: number; worst: number; n: number }> = {}

/** Runs `fn` (which moves BYTES) RUNS times after one warm-up; reports MB/s (p50 and the slowest run). */
async function rate(name: string, fn: () => Promise<number>): Promise<void> {
  if (ONLY && !name.startsWith('baseline') && !name.includes(ONLY)) return
  await fn()
  const xs: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now()
    const moved = await fn()
    const s = (performance.now() - t0) / 1000
    if (moved !== BYTES) throw new Error(`${name}: moved ${moved} bytes, not ${BYTES}`)
    xs.push(BYTES / 1e6 / s)
  }
  rows[name] = { p50: +pct(xs, 50).toFixed(1), worst: +Math.min(...xs).toFixed(1), n: xs.length }
  console.error(`${name.padEnd(58)} ${pct(xs, 50).toFixed(1).padStart(7)} MB/s   slowest ${Math.min(...xs).toFixed(1)}`)
}

const server = await serverProcess(import.meta.filename, 'streams', 0)
const { conn } = server

// the host's own pipe, the ceiling for any stream into this process
await rate('baseline: the same command on the host, piped to node', () => {
  return new Promise((resolve, reject) => {
    let n = 0
    const p = spawn('sh', ['-c', PRODUCE])
    p.stdout.on('data', (c: Buffer) => {
      n += c.length
    })
    p.on('error', reject)
    p.on('close', () => resolve(n))
  })
})

try {
  const sbx = await Sandbox.create({ ...conn, resources: { memoryMB: 1024 } })
  // inside gVisor with nothing leaving the sandbox: the most any stream out of it can carry
  await rate('baseline: the command inside the sandbox, to /dev/null', async () => {
    const r = await sbx.exec(`${PRODUCE} > /dev/null`)
    if (r.exitCode !== 0) throw new Error(r.stderr)
    return BYTES
  })
  await rate('exec, streamed (onStdout)', async () => {
    let n = 0
    for await (const e of sbx.execStream(PRODUCE)) if (e.type === 'stdout') n += e.data.length
    return n
  })
  await rate('background process output (output())', async () => {
    const proc = await sbx.exec(PRODUCE, { background: true })
    let n = 0
    for await (const e of proc.output()) if (e.type === 'stdout') n += e.data.length
    return n
  })
  await rate('terminal output (pty, raw bytes)', async () => {
    let n = 0
    // a raw terminal: no newline translation, no echo; the program is the only writer
    const pty = await sbx.pty.create({
      argv: ['sh', '-c', `stty raw -echo; ${PRODUCE}`],
      onData: (d) => {
        n += d.length
      },
    })
    await pty.wait()
    return n
  })
  const body = new Uint8Array(BYTES).fill(120)
  await rate('file write', async () => {
    await sbx.files.write('/tmp/big.bin', body)
    return BYTES
  })
  await rate('file read (bytes)', async () => (await sbx.files.read('/tmp/big.bin', { format: 'bytes' })).length)
  await sbx.kill()
  console.log(JSON.stringify(rows, null, 2))
} finally {
  await server.close()
}
