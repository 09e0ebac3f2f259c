// Memory pressure never hangs a call (issue 21): the OOM scenario of limits.test.ts — four
// processes that together pass a 256 MB sandbox's limit — run `--rounds` times in a row, first
// alone, then beside `--busy` sandboxes spinning their CPUs. Every round must end (hogs
// MemoryError'd or OOM-killed and the sandbox alive, or the sandbox errored out_of_memory) well
// inside the exec's own 60 s timeout; a round that waits it out is a hang.
//   node --import tsx bench/pressure.ts [--rounds 20] [--busy 10]
import { Sandbox, SandboxErroredError } from '@forkbox/sdk'
import { benchHost, printSummary, report } from './lib.ts'

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(name) + 1]) || fallback
const ROUNDS = arg('--rounds', 20)
const BUSY = arg('--busy', 10)

const HOG = 'import time; b = b"x" * (200 * 1024 * 1024); time.sleep(3)'
const SCRIPT = `pids=(); for i in 1 2 3 4; do python3 -c '${HOG}' & pids+=($!); done; for p in "\${pids[@]}"; do wait $p; echo "st=$?"; done`

type Outcome = 'contained' | 'errored' | 'hang' | 'failed'

async function round(conn: { url: string; apiKey: string }): Promise<{ ms: number; outcome: Outcome; detail: string }> {
  const sbx = await Sandbox.create({ ...conn, resources: { memoryMB: 256 } })
  const t0 = performance.now()
  let outcome: Outcome
  let detail = ''
  try {
    const r = await sbx.exec(SCRIPT, { timeoutSeconds: 60 })
    detail = r.stdout.replace(/\n/g, ' ')
    const alive = (await sbx.exec(['echo', 'alive'], { timeoutSeconds: 20 })).stdout === 'alive\n'
    outcome = r.stdout.match(/st=/g)?.length === 4 && alive ? 'contained' : 'failed'
  } catch (e) {
    detail = String(e)
    outcome =
      e instanceof SandboxErroredError && e.reason === 'out_of_memory'
        ? 'errored'
        : (e as { code?: string }).code === 'EXEC_TIMEOUT'
          ? 'hang'
          : 'failed'
  }
  const ms = performance.now() - t0
  await sbx.kill().catch(() => {})
  return { ms, outcome, detail }
}

async function rounds(label: string, conn: { url: string; apiKey: string }): Promise<number> {
  const times: number[] = []
  let bad = 0
  for (let i = 0; i < ROUNDS; i++) {
    const r = await round(conn)
    times.push(r.ms)
    if (r.outcome === 'hang' || r.outcome === 'failed') bad++
    console.error(`${label} #${i + 1}: ${r.outcome} in ${(r.ms / 1000).toFixed(1)} s — ${r.detail.slice(0, 160)}`)
  }
  report(`OOM scenario, ${label}`, times)
  return bad
}

const host = await benchHost('pressure', 0, { freezeAfterSeconds: 0 })
let bad = 0
try {
  bad += await rounds('alone', host.conn)
  const busy = await Promise.all(
    Array.from({ length: BUSY }, () =>
      Sandbox.create({ ...host.conn, resources: { memoryMB: 256 }, ttlSeconds: 3600 }),
    ),
  )
  for (const b of busy) await b.exec('while :; do :; done', { background: true })
  bad += await rounds(`beside ${BUSY} busy sandboxes`, host.conn)
  await Promise.all(busy.map((b) => b.kill()))
} finally {
  await host.close()
}
printSummary()
console.error(bad === 0 ? 'no hang, no failure' : `${bad} round(s) hung or failed`)
process.exit(bad === 0 ? 0 : 1)
