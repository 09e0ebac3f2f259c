// Soak: N code-interpreter sandboxes loop exec / files / runCode for M minutes against forkbox in a
// process of its own, its RSS each minute; then K create+kill in a row and a check that nothing of
// them is left. Exits 0 only with no error, a flat RSS and no leak. Not a test: it takes minutes.
//   node --import tsx bench/soak.ts [--sandboxes N] [--minutes M] [--churn K] [--pause-ms P] [--memory-mb MB]
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { loadavg, networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { networkNames } from '@forkbox/agent'
import { ForkboxError, Sandbox } from '@forkbox/sdk'
import { cgroupHierarchiesWith, networkLeftovers } from '../tests/e2e/harness.ts'
import { printSummary, report, serverProcess } from './lib.ts'

const arg = (name: string, fallback: number) => Number(process.argv[process.argv.indexOf(name) + 1]) || fallback
const SANDBOXES = arg('--sandboxes', 100)
const MINUTES = arg('--minutes', 10)
const CHURN = arg('--churn', 1000)
/** Think time between a sandbox's rounds; 0: each loop calls as fast as the host answers. */
const PAUSE_MS = arg('--pause-ms', 0)
/** Unset: the template's defaults, restored from its baked snapshot (other resources boot cold). */
const MEMORY_MB = arg('--memory-mb', 0) || undefined
const POOL = 2
const CREATE_CONCURRENCY = 4
/** A call that takes longer than this is an error of the soak, not a slow sample. */
const CALL_TIMEOUT_MS = 120_000
/** RSS is flat when the last minute's is within this of the warm one (after the first minute). */
const FLAT_RATIO = 0.1
const FLAT_SLACK_MIB = 20

/** A /16 no interface here has an address in: benchHost's first block (10.230) is every bench's, and another may be running. */
function freeSubnet(): string {
  const used = new Set(
    Object.values(networkInterfaces())
      .flat()
      .map((a) => a?.address.split('.').slice(0, 2).join('.')),
  )
  for (let b = 250; b < 255; b++) if (!used.has(`10.${b}`)) return `10.${b}.0.0/16`
  throw new Error('no free block in 10.250-254.0.0/16 on this host')
}

if (process.argv.includes('--serve')) {
  // benchHost passes its options on to startHost: the subnet rides along with the typed ones
  const options: Parameters<typeof serverProcess>[3] & { networkSubnet: string } = {
    prebuild: ['base', 'code-interpreter'],
    maxSandboxes: SANDBOXES + 20,
    // pinned, so the pools hold as many sandboxes after the run as before it
    poolMax: POOL,
    networkSubnet: freeSubnet(),
  }
  await serverProcess(import.meta.filename, 'soak', POOL, options)
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

/** The platform in a child process, as serverProcess starts it, with the child's pid (its RSS is the server's and the agent's). */
async function startServer() {
  const child = spawn(
    process.execPath,
    [...process.execArgv, import.meta.filename, ...process.argv.slice(2), '--serve'],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  )
  const line = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += String(d)
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')))
    })
    child.once('exit', (code) => reject(new Error(`the soak server exited (${code})`)))
  })
  const { url, apiKey } = JSON.parse(line) as { url: string; apiKey: string }
  const pid = child.pid
  if (pid === undefined) throw new Error('the soak server has no pid')
  return {
    pid,
    // no retries: a 503 the SDK would retry is an error of the soak
    conn: { url, apiKey, maxRetries: 0 },
    async close(): Promise<void> {
      const closed = new Promise((r) => child.once('close', r))
      child.stdin.end()
      const overdue = setTimeout(() => {
        console.error(`the soak server (pid ${pid}) did not stop within 180 s: killed`)
        child.kill('SIGKILL')
      }, 180_000)
      await closed
      clearTimeout(overdue)
    },
  }
}

/** What benchHost named the server's dirs, cgroup and network after (its tag holds the server's pid). */
function hostNames(pid: number) {
  const tag = `forkbox-bench-soak-${pid}`
  const dataDir = `${process.env.FORKBOX_BENCH_DIR ?? '/tmp'}/${tag}`
  const stateDir = `/run/${tag}`
  const forks = createHash('sha256').update(dataDir).digest('hex').slice(0, 12)
  return {
    dataDir,
    stateDir,
    cgroupParent: tag,
    shmDir: `/dev/shm/forkbox-forks-${forks}`,
    net: networkNames(`${tag}:${stateDir}`),
  }
}
type HostNames = ReturnType<typeof hostNames>

function rssMiB(pid: number): number {
  const kb = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)?.[1]
  return Number(kb ?? Number.NaN) / 1024
}

const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length

function memAvailableGiB(): number {
  const kb = readFileSync('/proc/meminfo', 'utf8').match(/^MemAvailable:\s+(\d+)/m)?.[1]
  return Number(kb ?? 0) / 2 ** 20
}

/** The host's 1-minute load average: other work on this machine shows in the latencies. */
const load = () => (loadavg()[0] ?? 0).toFixed(1)

const dirEntries = (dir: string) => (existsSync(dir) ? readdirSync(dir) : [])

/** The pids of runsc processes (runsc, gofer, sandbox) of the host's state dir. */
function runscProcesses(stateDir: string): string[] {
  const root = new RegExp(`--root=${stateDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\s|$)`)
  return execFileSync('ps', ['-eo', 'pid=,args='])
    .toString()
    .split('\n')
    .filter((l) => root.test(l))
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
}

function mountsUnder(...dirs: string[]): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((l) => dirs.some((d) => l.includes(`${d}/`) || l.includes(`${d} `)))
}

interface NftObject {
  name?: string
  chain?: string
  elem?: unknown[]
}

/** Chains, sets, maps, rules and elements of the agent's nftables table (per sandbox: a chain, sets and map entries). */
function nftObjects(table: string): string[] {
  let out: string
  try {
    out = execFileSync('nft', ['-j', 'list', 'table', 'inet', table], {
      stdio: ['ignore', 'pipe', 'ignore'],
    }).toString()
  } catch {
    return []
  }
  const items = (JSON.parse(out) as { nftables: Record<string, NftObject>[] }).nftables
  return items.flatMap((item) =>
    Object.entries(item)
      .filter(([kind]) => kind !== 'metainfo' && kind !== 'table')
      .flatMap(([kind, o]) => [
        `${kind} ${o.name ?? o.chain ?? ''}`,
        ...(o.elem ?? []).map((e) => `${kind} ${o.name} element ${JSON.stringify(e)}`),
      ]),
  )
}

/** Everything of the running host's sandboxes, by kind (the warm pools' and spare network slots' included). */
function remnants(h: HostNames): Record<string, string[]> {
  // runsc's own files, not `runsc list`: that asks each sandbox, and a frozen one never answers
  const containers = dirEntries(h.stateDir).filter((f) => f.endsWith('.state'))
  const cgroups = cgroupHierarchiesWith(h.cgroupParent).flatMap((c) =>
    readdirSync(join('/sys/fs/cgroup', c, h.cgroupParent), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `${c || 'unified'}/${e.name}`),
  )
  return {
    'runsc containers': containers,
    'runsc processes': runscProcesses(h.stateDir),
    'bundle dirs': dirEntries(join(h.dataDir, 'sandboxes')),
    mounts: mountsUnder(h.dataDir, h.stateDir),
    cgroups,
    netns: dirEntries('/run/netns').filter((n) => n.startsWith(h.net.netnsPrefix)),
    veths: dirEntries('/sys/class/net').filter((n) => n.startsWith(h.net.ifacePrefix)),
    'nft objects': nftObjects(h.net.table),
    '/dev/shm entries': dirEntries(h.shmDir),
  }
}

/** What is left of the host once it has stopped: all lists must be empty. */
function afterStop(h: HostNames): Record<string, string[]> {
  const { netns, ifaces, rules } = networkLeftovers(h.cgroupParent, h.stateDir)
  return {
    'runsc processes': runscProcesses(h.stateDir),
    mounts: mountsUnder(h.dataDir, h.stateDir),
    cgroups: cgroupHierarchiesWith(h.cgroupParent),
    netns,
    veths: ifaces,
    'nft table': rules,
    dirs: [h.dataDir, h.stateDir, h.shmDir].filter((d) => existsSync(d)),
  }
}

const counts = (r: Record<string, string[]>) =>
  Object.entries(r)
    .map(([k, xs]) => `${k} ${xs.length}`)
    .join(', ')

/** The kinds that hold more now than in `before`, with a few of the names. */
function grown(before: Record<string, string[]>, now: Record<string, string[]>): string[] {
  return Object.entries(now)
    .filter(([k, xs]) => xs.length > (before[k]?.length ?? 0))
    .map(([k, xs]) => {
      const had = new Set(before[k])
      const added = xs.filter((x) => !had.has(x)).slice(0, 5)
      return `${k}: ${before[k]?.length ?? 0} → ${xs.length} (new: ${added.join(' | ')})`
    })
}

/** Polls until the counts stop changing (the pools refilled, slots made): three equal looks 2 s apart. */
async function settle(h: HostNames, timeoutMs: number): Promise<Record<string, string[]>> {
  const deadline = Date.now() + timeoutMs
  let last = remnants(h)
  let same = 0
  while (same < 2 && Date.now() < deadline) {
    await sleep(2000)
    const now = remnants(h)
    same = counts(now) === counts(last) ? same + 1 : 0
    last = now
  }
  return last
}

/**
 * Polls until every kind holds as many as in `baseline` (kills and pool refills finish in the
 * background): a refill under way could otherwise hide a leaked one of the same kind.
 */
async function backTo(h: HostNames, baseline: Record<string, string[]>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  let now = remnants(h)
  while (counts(now) !== counts(baseline) && Date.now() < deadline) {
    await sleep(2000)
    now = remnants(h)
  }
  return now
}

class Mismatch extends Error {
  readonly code = 'MISMATCH'
}

const latencies = new Map<string, number[]>()
const errors: { op: string; code: string; message: string }[] = []
let opsDone = 0

function codeOf(err: unknown): string {
  if (err instanceof ForkboxError) return String(err.code)
  if (err instanceof Error) return 'code' in err && typeof err.code === 'string' ? err.code : err.name
  return 'UNKNOWN'
}

function failed(op: string, err: unknown): void {
  const e = { op, code: codeOf(err), message: err instanceof Error ? err.message : String(err) }
  errors.push(e)
  if (errors.length <= 5) console.error(`error #${errors.length}: ${op}: ${e.code}: ${e.message}`)
}

/** Runs one call and says how long it took; a throw (or a wrong answer) is recorded as an error of `op`. */
async function call(op: string, fn: (signal: AbortSignal) => Promise<unknown>): Promise<number | undefined> {
  const t0 = performance.now()
  try {
    await fn(AbortSignal.timeout(CALL_TIMEOUT_MS))
  } catch (err) {
    failed(op, err)
    return undefined
  }
  return performance.now() - t0
}

/** A soak call: its time goes to the op's samples. */
async function soakCall(op: string, fn: (signal: AbortSignal) => Promise<unknown>): Promise<boolean> {
  const ms = await call(op, fn)
  if (ms === undefined) return false
  latencies.set(op, [...(latencies.get(op) ?? []), ms])
  opsDone++
  return true
}

/** Runs `fn` over `items`, `limit` at a time. */
async function inBatches<T>(items: T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      await fn(items[i] as T, i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

const OPS = {
  exec: 'soak: exec ["echo", token]',
  write: 'soak: files.write 1 KiB',
  read: 'soak: files.read 1 KiB (same bytes back)',
  runCode: "soak: runCode('x = n * 7; x')",
}

/** One sandbox's rounds until `deadline`; false when it stopped early (three failed rounds in a row). */
async function soakLoop(sbx: Sandbox, index: number, deadline: number): Promise<boolean> {
  let failedRounds = 0
  for (let n = 1; Date.now() < deadline; n++) {
    const token = `soak-${index}-${n}`
    const content = `${token}\n`.repeat(Math.ceil(1024 / (token.length + 1)))
    const path = `/tmp/soak/${n % 8}.txt`
    const ok = [
      await soakCall(OPS.exec, async (signal) => {
        const r = await sbx.exec(['echo', token], { signal })
        if (r.exitCode !== 0 || r.stdout !== `${token}\n`)
          throw new Mismatch(`exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout.slice(0, 80))}`)
      }),
      await soakCall(OPS.write, (signal) => sbx.files.write(path, content, { signal })),
      await soakCall(OPS.read, async (signal) => {
        const got = await sbx.files.read(path, { signal })
        if (got !== content) throw new Mismatch(`read ${got.length} bytes back, not the ${content.length} written`)
      }),
      await soakCall(OPS.runCode, async (signal) => {
        const e = await sbx.runCode(`x = ${n} * 7; x`, { signal })
        if (e.error || e.text !== String(n * 7))
          throw new Mismatch(
            `text ${JSON.stringify(e.text)}, error ${e.error ? `${e.error.name}: ${e.error.value}` : null}`,
          )
      }),
    ]
    failedRounds = ok.every(Boolean) ? 0 : failedRounds + 1
    if (failedRounds >= 3) {
      console.error(`sandbox ${sbx.id}: three failed rounds in a row, its loop stops`)
      return false
    }
    if (PAUSE_MS) await sleep(PAUSE_MS)
  }
  return true
}

const server = await startServer()
const names = hostNames(server.pid)
const conn = server.conn
let verdict = { errors: 0, rssFlat: false, leak: true }
try {
  console.error(
    `soak: ${SANDBOXES} code-interpreter sandboxes × ${MINUTES} min (pause ${PAUSE_MS} ms), then ${CHURN} create+kill; server pid ${server.pid}, RSS ${rssMiB(server.pid).toFixed(1)} MiB`,
  )
  // both templates' pools in play before the baseline, as they will be after the churn
  await (await Sandbox.create({ ...conn, template: 'code-interpreter' })).kill()
  await (await Sandbox.create({ ...conn })).kill()
  const baseline = await settle(names, 120_000)
  console.error(`before: ${counts(baseline)}`)

  const resources = MEMORY_MB ? { memoryMB: MEMORY_MB } : undefined
  const ttlSeconds = MINUTES * 60 + 3600
  const boxes: Sandbox[] = []
  const creates: number[] = []
  await inBatches([...Array(SANDBOXES).keys()], CREATE_CONCURRENCY, async () => {
    const ms = await call('setup: create code-interpreter', async (signal) => {
      boxes.push(await Sandbox.create({ ...conn, template: 'code-interpreter', ttlSeconds, resources, signal }))
    })
    if (ms !== undefined) creates.push(ms)
  })
  report(`setup: create code-interpreter, ${CREATE_CONCURRENCY} at a time`, creates)
  console.error(
    `${boxes.length} sandboxes up: server RSS ${rssMiB(server.pid).toFixed(1)} MiB, host MemAvailable ${memAvailableGiB().toFixed(1)} GiB`,
  )

  const start = Date.now()
  const deadline = start + MINUTES * 60_000
  const rssAtStart = rssMiB(server.pid)
  const loops = boxes.map((b, i) => soakLoop(b, i, deadline))
  const rssByMinute: number[] = []
  for (let m = 1; m <= MINUTES; m++) {
    await sleep(start + m * 60_000 - Date.now())
    const rss = rssMiB(server.pid)
    rssByMinute.push(rss)
    console.error(
      `minute ${m}: ${((Date.now() - start) / 1000).toFixed(0)} s, ${opsDone} ops, ${errors.length} errors, server+agent RSS ${rss.toFixed(1)} MiB (${fdCount(server.pid)} fds), host MemAvailable ${memAvailableGiB().toFixed(1)} GiB, load ${load()}`,
    )
  }
  const stopped = (await Promise.all(loops)).filter((ok) => !ok).length
  for (const op of Object.values(OPS)) report(op, latencies.get(op) ?? [])
  if (stopped) console.error(`${stopped} sandbox loops stopped early`)

  // warm: after the first minute (a one-minute run can only compare with the start)
  const warm = MINUTES >= 2 ? (rssByMinute[0] ?? rssAtStart) : rssAtStart
  const last = rssByMinute.at(-1) ?? rssAtStart
  const rssFlat = last - warm < warm * FLAT_RATIO + FLAT_SLACK_MIB
  console.error(
    `RSS ${rssFlat ? 'flat' : 'NOT flat'}: ${warm.toFixed(1)} MiB ${MINUTES >= 2 ? 'after minute 1' : 'at the start'} → ${last.toFixed(1)} MiB after minute ${MINUTES} (${(last - warm).toFixed(1)} MiB; bound ${(warm * FLAT_RATIO + FLAT_SLACK_MIB).toFixed(1)} MiB); per minute: ${rssByMinute.map((r) => r.toFixed(0)).join(', ')}`,
  )

  const kills: number[] = []
  await inBatches(boxes, CREATE_CONCURRENCY, async (sbx) => {
    const ms = await call('kill (soak sandboxes)', (signal) => sbx.kill({ signal }))
    if (ms !== undefined) kills.push(ms)
  })
  report(`kill soak sandboxes, ${CREATE_CONCURRENCY} at a time`, kills)

  const churnCreates: number[] = []
  const churnKills: number[] = []
  for (let i = 1; i <= CHURN; i++) {
    let sbx: Sandbox | undefined
    const created = await call('churn: create', async (signal) => {
      sbx = await Sandbox.create({ ...conn, signal })
    })
    if (created !== undefined) churnCreates.push(created)
    const box = sbx
    const killed = box && (await call('churn: kill', (signal) => box.kill({ signal })))
    if (killed !== undefined) churnKills.push(killed)
    if (i % Math.max(1, Math.round(CHURN / 10)) === 0)
      console.error(
        `churn ${i}/${CHURN}: ${errors.length} errors, server+agent RSS ${rssMiB(server.pid).toFixed(1)} MiB (${fdCount(server.pid)} fds), load ${load()}`,
      )
  }
  report('churn: create (base), in a row', churnCreates)
  report('churn: kill, in a row', churnKills)

  const after = await backTo(names, baseline, 120_000)
  const leaks = grown(baseline, after)
  console.error(`after the churn: ${counts(after)}`)
  console.error(leaks.length ? `LEAK after the churn:\n  ${leaks.join('\n  ')}` : 'no leak after the churn')
  console.error(`server+agent RSS after the churn ${rssMiB(server.pid).toFixed(1)} MiB (${fdCount(server.pid)} fds)`)
  verdict = { errors: errors.length, rssFlat, leak: leaks.length > 0 }
} finally {
  await server.close()
}

const left = Object.entries(afterStop(names)).filter(([, xs]) => xs.length > 0)
console.error(
  left.length
    ? `LEFT after the server stopped: ${left.map(([k, xs]) => `${k}: ${xs.join(' | ')}`).join('; ')}`
    : 'nothing left after the server stopped',
)
if (errors.length) {
  const byCode = new Map<string, number>()
  for (const e of errors) byCode.set(`${e.op}: ${e.code}`, (byCode.get(`${e.op}: ${e.code}`) ?? 0) + 1)
  console.error(`${errors.length} errors: ${[...byCode].map(([k, n]) => `${k} ×${n}`).join(', ')}`)
}
const pass = verdict.errors === 0 && verdict.rssFlat && !verdict.leak && left.length === 0
console.error(
  `soak ${pass ? 'PASSED' : 'FAILED'}: ${verdict.errors} errors, RSS ${verdict.rssFlat ? 'flat' : 'not flat'}, ${verdict.leak || left.length ? 'a leak' : 'no leak'}`,
)
printSummary()
process.exitCode = pass ? 0 : 1
