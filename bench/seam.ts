// The calls that cross the server↔agent seam, through the SDK: create → first exec, exec, a 1 KB
// file round trip and fork → first exec on a one-box host, then create → first exec, exec and the
// file round trip through a control plane whose one host is a `forkbox agent` in a network
// namespace of its own (Postgres, as a fleet runs). Run before and after a change to that seam by
// bench/before-after.ts. Not a test: it asserts nothing but that nothing is left behind.
//   node --import tsx bench/seam.ts [--iterations N] [--only one-box|fleet] [--out FILE]
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultAgentConfig, networkNames } from '@forkbox/agent'
import { type ServerHost, startServerHost } from '@forkbox/host'
import { Sandbox } from '@forkbox/sdk'
import { startPostgres, type TestPostgres } from '../apps/server/test/postgres.ts'
import { N as argN, benchHost, measure, printSummary, report, timed } from './lib.ts'

const ROOT = new URL('..', import.meta.url).pathname
const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined)
/** Creates and forks (each a few seconds with its pause); the cheap calls get three times as many. */
const N = arg('--iterations') ? argN : 20
const CALLS = 3 * N
const only = arg('--only')
const part = (name: string) => only === undefined || only === name
const out = arg('--out')
// a create's pause lets the kill's teardown and the pool's refill (one restore) finish: a
// steady-state pool hit, as in bench/run.ts
const CREATE_PAUSE_MS = 3000
const FORK_PAUSE_MS = 1500
const KB = 'x'.repeat(1024)

type Conn = { url: string; apiKey: string }
const samples: Record<string, number[]> = {}
function record(name: string, xs: number[]): void {
  samples[name] = xs
  report(name, xs)
}

/** What this run closes, last first; run once, from `finally` or on SIGINT/SIGTERM. */
const closers: (() => Promise<void> | void)[] = []
/** Registers `fn` to run at the end; the function returned runs it now instead. */
function onClose(fn: () => Promise<void> | void): () => Promise<void> {
  closers.push(fn)
  return async () => {
    const i = closers.indexOf(fn)
    if (i < 0) return
    closers.splice(i, 1)
    await fn()
  }
}
let closing: Promise<void> | undefined
function closeAll(): Promise<void> {
  closing ??= (async () => {
    for (const close of closers.reverse()) {
      try {
        await close()
      } catch (err) {
        console.error(`seam: cleanup step failed: ${(err as Error).message}`)
      }
    }
  })()
  return closing
}
let failed = false
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    console.error(`seam: ${sig}, cleaning up`)
    void closeAll().then(() => process.exit(130))
  })
// e.g. a closed stderr (EPIPE): the sandboxes, netns and Postgres go all the same
process.on('uncaughtException', (err) => {
  failed = true
  try {
    console.error(`seam: ${err.stack ?? err}`)
  } catch {}
  void closeAll().then(() => process.exit(1))
})

/** create → first exec as a user sees it, with the create alone beside it; kills are not timed. */
async function creates(conn: Conn, label: string): Promise<void> {
  const createOnly: number[] = []
  const once = async () => {
    const t0 = performance.now()
    const s = await Sandbox.create({ ...conn })
    const created = performance.now() - t0
    await s.exec(['true'])
    const ms = performance.now() - t0
    await s.kill()
    return [created, ms] as const
  }
  // untimed: the first calls of a process (JIT, connections) are not the steady state
  for (let i = 0; i < 2; i++) {
    await new Promise((r) => setTimeout(r, CREATE_PAUSE_MS))
    await once()
  }
  const xs = await timed(
    N,
    async () => {
      const [created, ms] = await once()
      createOnly.push(created)
      return ms
    },
    CREATE_PAUSE_MS,
  )
  record(`${label}: create (pool hit)`, createOnly)
  record(`${label}: create → first exec (pool hit)`, xs)
}

async function calls(sbx: Sandbox, label: string): Promise<void> {
  record(`${label}: exec ["true"]`, await measure(CALLS, () => sbx.exec(['true'])))
  record(
    `${label}: 1 KB file write + read`,
    await measure(CALLS, async () => {
      await sbx.files.write('/work/seam.txt', KB)
      await sbx.files.read('/work/seam.txt')
    }),
  )
}

async function forks(sbx: Sandbox, label: string): Promise<void> {
  const forkOnly: number[] = []
  const once = async () => {
    const t0 = performance.now()
    const [child] = await sbx.fork({ count: 1 })
    if (!child) throw new Error('fork returned no child')
    const forked = performance.now() - t0
    await child.exec(['true'])
    const ms = performance.now() - t0
    await child.kill()
    return [forked, ms] as const
  }
  await once()
  const xs = await timed(
    N,
    async () => {
      const [forked, ms] = await once()
      forkOnly.push(forked)
      return ms
    },
    FORK_PAUSE_MS,
  )
  record(`${label}: fork ×1 of a running sandbox`, forkOnly)
  record(`${label}: fork ×1 → first exec on the child`, xs)
}

/** What a host's sandboxes could leave on this machine once it closed; every list must be empty. */
function leftovers(cgroupParent: string, stateDir: string): Record<string, string[]> {
  const net = networkNames(`${cgroupParent}:${stateDir}`)
  return {
    procs: execFileSync('ps', ['-eo', 'args='])
      .toString()
      .split('\n')
      .filter((l) => l.includes(`--root=${stateDir}`)),
    cgroups: ['', ...readdirSync('/sys/fs/cgroup')].filter((c) => existsSync(join('/sys/fs/cgroup', c, cgroupParent))),
    netns: existsSync('/run/netns') ? readdirSync('/run/netns').filter((n) => n.startsWith(net.netnsPrefix)) : [],
    ifaces: readdirSync('/sys/class/net').filter((n) => n.startsWith(net.ifacePrefix)),
    stateDir: existsSync(stateDir) ? [stateDir] : [],
  }
}
const checks: [string, () => Record<string, string[]>][] = []

const tail = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').slice(-2000) : '')

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'ignore' })
}

/** A control plane in this process (as tests/e2e/fleet-harness.ts starts one) and one `forkbox agent` in a netns. */
async function startFleet(): Promise<Conn> {
  // closers run last first: the control plane, then the agent (the control plane finishes the
  // stops it started before it lets go of the host, as the harness does), its state, the netns
  const dir = mkdtempSync(join(tmpdir(), 'fbx-seam-'))
  const logFile = join(dir, 'agent.log')
  onClose(() => {
    if (failed) console.error(`seam: the agent's log ended with: ${tail(logFile)}`)
    rmSync(dir, { recursive: true, force: true })
  })
  const pg: TestPostgres = await startPostgres()
  onClose(() => pg.stop())

  // a block of its own (the e2e fleet harness uses 10.66.n.0/30 and 10.170-209, benchHost 10.230-249)
  const tag = `${process.pid % 100000}`
  const ns = `fbxs-${tag}`
  const hostIf = `fbxsh${tag}`
  const agentIf = `fbxsa${tag}`
  const gateway = `10.67.${process.pid % 250}.1`
  const addr = `10.67.${process.pid % 250}.2`
  ip('netns', 'add', ns)
  onClose(() => ip('netns', 'del', ns))
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', agentIf)
  ip('link', 'set', agentIf, 'netns', ns)
  ip('addr', 'add', `${gateway}/30`, 'dev', hostIf)
  ip('link', 'set', hostIf, 'up')
  ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${addr}/30`, 'dev', agentIf)
  ip('netns', 'exec', ns, 'ip', 'link', 'set', agentIf, 'up')
  ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up')
  ip('netns', 'exec', ns, 'ip', 'route', 'add', 'default', 'via', gateway)

  const cgroupParent = `fbx-seam-${tag}`
  const stateDir = `/run/${cgroupParent}`
  onClose(() => rmSync(stateDir, { recursive: true, force: true }))
  checks.push([
    'fleet agent',
    () => ({
      ...leftovers(cgroupParent, stateDir),
      agentNetns: existsSync(`/run/netns/${ns}`) ? [ns] : [],
      veth: existsSync(`/sys/class/net/${hostIf}`) ? [hostIf] : [],
    }),
  ])
  let agent: ChildProcess | undefined
  onClose(async () => {
    const p = agent
    if (!p || p.exitCode !== null || p.signalCode !== null) return
    const exited = new Promise((r) => p.once('exit', r))
    p.kill('SIGTERM')
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))])
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
  })

  const joinToken = `seam-join-token-${process.pid}-0123456789`
  const secretPath = join(dir, 'server.secret')
  writeFileSync(secretPath, execFileSync('head', ['-c', '32', '/dev/urandom']), { mode: 0o600 })
  const cp: ServerHost = await startServerHost({
    port: 0,
    host: '0.0.0.0',
    dataDir: join(dir, 'control-plane'),
    databaseUrl: await pg.database('seam'),
    joinToken,
    secretPath,
    logLevel: 'warn',
  })
  onClose(() => cp.close())
  if (!cp.bootstrapKey) throw new Error('a control plane on an empty database must make the admin key')

  const log = createWriteStream(logFile)
  // nsenter, not `ip netns exec`: that one also remounts /sys, hiding the cgroup hierarchies
  const p = spawn(
    'nsenter',
    [`--net=/run/netns/${ns}`, process.execPath, join(ROOT, 'apps/cli/bin/forkbox.mjs'), 'agent', '--port', '7412'],
    {
      env: {
        ...process.env,
        FORKBOX_CONTROL_PLANE_URL: `http://${gateway}:${cp.port}`,
        FORKBOX_JOIN_TOKEN: joinToken,
        FORKBOX_HOST_ID: 'seam-h0',
        FORKBOX_ADVERTISE_URL: `http://${addr}:7412`,
        FORKBOX_DATA_DIR: join(dir, 'agent'),
        FORKBOX_TEMPLATES_DIR: process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir,
        FORKBOX_RUNSC_STATE_DIR: stateDir,
        FORKBOX_CGROUP_PARENT: cgroupParent,
        FORKBOX_NETWORK_SUBNET: '10.229.0.0/16',
        FORKBOX_PREBUILD: 'base',
        FORKBOX_POOL_SIZE: '1',
        FORKBOX_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  agent = p
  p.stderr?.pipe(log)
  await new Promise<void>((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(() => reject(new Error(`the agent did not join in 300 s: ${tail(logFile)}`)), 300_000)
    p.stdout?.on('data', (c: Buffer) => {
      log.write(c)
      seen += c.toString()
      if (seen.includes('joined')) {
        clearTimeout(timer)
        resolve()
      }
    })
    p.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the agent exited (${code}) before it joined: ${tail(logFile)}`))
    })
  })
  return { url: `http://127.0.0.1:${cp.port}`, apiKey: cp.bootstrapKey }
}

const started = performance.now()
try {
  // which tree's code this run measures (bench/before-after.ts checks it)
  const code = createRequire(import.meta.url).resolve('@forkbox/host')
  console.error(`seam: measuring ${code}, n=${N} (creates, forks) / ${CALLS} (calls)`)

  if (part('one-box')) {
    const host = await benchHost('seam', 1)
    const cgroupParent = host.config.cgroupParent
    const stateDir = host.config.runscStateDir
    checks.push(['one box', () => leftovers(cgroupParent, stateDir)])
    const close = onClose(() => host.close())
    await creates(host.conn, 'one box')
    const sbx = await Sandbox.create({ ...host.conn })
    await calls(sbx, 'one box')
    await forks(sbx, 'one box')
    await sbx.kill()
    // closed now, so that the fleet part has the machine to itself
    await close()
  }

  if (part('fleet')) {
    const conn = await startFleet()
    await creates(conn, 'fleet')
    const sbx = await Sandbox.create({ ...conn })
    await calls(sbx, 'fleet')
    await sbx.kill()
  }
} catch (err) {
  failed = true
  throw err
} finally {
  await closeAll()
}

let leaked = false
for (const [what, check] of checks) {
  const left = Object.entries(check()).filter(([, xs]) => xs.length > 0)
  if (left.length === 0) continue
  leaked = true
  console.error(`seam: the ${what} left behind: ${JSON.stringify(Object.fromEntries(left))}`)
}
const seconds = (performance.now() - started) / 1000
console.error(`seam: done in ${seconds.toFixed(0)} s${leaked ? ', with leftovers' : ', nothing left behind'}`)
if (out)
  writeFileSync(
    out,
    JSON.stringify({ code: createRequire(import.meta.url).resolve('@forkbox/host'), seconds, leaked, samples }),
  )
printSummary()
// at once: idle keep-alive sockets of the clients would hold the process for a minute
process.exit(leaked ? 1 : 0)
