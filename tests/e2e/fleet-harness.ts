// A real fleet on this machine: Postgres in a temp dir, control-plane replicas in this process,
// and host agents as child processes (`forkbox agent`), each in a network namespace of its own
// reaching the replicas over a veth pair, with its own state dir, cgroup parent and sandbox subnet.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { networkNames } from '@forkbox/agent'
import { type ServerHost, startServerHost } from '@forkbox/host'
import pgDriver from 'pg'
import { startPostgres, type TestPostgres } from '../../apps/server/test/postgres.ts'
import { cgroupHierarchiesWith, sharedTemplatesDir, testSubnet } from './harness.ts'

const ROOT = new URL('../..', import.meta.url).pathname
const AGENT_PORT = 7412
export const JOIN_TOKEN = `fleet-join-token-${process.pid}-0123456789`

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: 'ignore' })
}

function inNs(ns: string, ...args: string[]): string {
  return execFileSync('ip', ['netns', 'exec', ns, ...args]).toString()
}

export interface FleetAgent {
  id: string
  /** Its network namespace; the agent's own address in it is `addr`. */
  ns: string
  addr: string
  /** The host side of its veth (replicas listen on every address; the agent reaches them here). */
  gateway: string
  dataDir: string
  /** The shared templates dir, or (`ownTemplates`) one of its own under its data dir. */
  templatesDir: string
  stateDir: string
  cgroupParent: string
  subnet: string
  logFile: string
  proc: ChildProcess | null
  /** Starts (or starts again) the agent process; resolves once it has joined. */
  start(controlPlanePort: number): Promise<void>
  /** SIGKILL: sandboxes (runsc) keep running, as when an agent process crashes. */
  kill9(): Promise<void>
  /** SIGTERM and wait. */
  stop(): Promise<void>
}

export interface Fleet {
  pg: TestPostgres
  databaseUrl: string
  replicas: ServerHost[]
  agents: FleetAgent[]
  apiKey: string
  secretPath: string
  dir: string
  /** What a replica is started with (to start one again). */
  startReplica(): Promise<ServerHost>
  /** A replica as its own process (`forkbox server`), to be killed with SIGKILL. */
  startReplicaProcess(): Promise<{ url: string; port: number; kill9(): Promise<void> }>
  /** The placements table with each sandbox's state (for failure messages). */
  placements(): Promise<unknown[]>
  stop(): Promise<void>
}

/**
 * A templates dir of an agent's own, with the built-in templates (hardlinked from the shared dir
 * the e2e run built) but no rootfs a Dockerfile build made: a host that shares no disk with the
 * others, as far as templates built by users go.
 */
function ownTemplatesDir(dataDir: string): string {
  const own = join(dataDir, 'templates')
  mkdirSync(own)
  for (const name of readdirSync(sharedTemplatesDir))
    if (/^[a-z0-9][a-z0-9_.-]*-[0-9a-f]{16}(\.snapshot-[0-9a-f]{16})?$/.test(name) && !name.includes('built-'))
      execFileSync('cp', ['-al', join(sharedTemplatesDir, name), join(own, name)])
  return own
}

function makeAgent(n: number, dir: string, ownTemplates: boolean): FleetAgent {
  const tag = `${process.pid % 100000}${n}`
  const ns = `fbxf-${tag}`
  const hostIf = `fh${tag}`
  const agentIf = `fa${tag}`
  const gateway = `10.66.${n}.1`
  const addr = `10.66.${n}.2`
  ip('netns', 'add', ns)
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', agentIf)
  ip('link', 'set', agentIf, 'netns', ns)
  ip('addr', 'add', `${gateway}/30`, 'dev', hostIf)
  ip('link', 'set', hostIf, 'up')
  ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${addr}/30`, 'dev', agentIf)
  ip('netns', 'exec', ns, 'ip', 'link', 'set', agentIf, 'up')
  ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up')
  ip('netns', 'exec', ns, 'ip', 'route', 'add', 'default', 'via', gateway)
  const cgroupParent = `fbx-fleet-${tag}`
  const dataDir = mkdtempSync(join(dir, `agent${n}-`))
  const a: FleetAgent = {
    id: `h${n}`,
    ns,
    addr,
    gateway,
    dataDir,
    templatesDir: ownTemplates ? ownTemplatesDir(dataDir) : sharedTemplatesDir,
    stateDir: `/run/${cgroupParent}`,
    cgroupParent,
    subnet: testSubnet(n + 1),
    logFile: join(dir, `agent${n}.log`),
    proc: null,
    async start(controlPlanePort) {
      const log = createWriteStream(a.logFile, { flags: 'a' })
      const env = {
        ...process.env,
        FORKBOX_CONTROL_PLANE_URL: `http://${gateway}:${controlPlanePort}`,
        FORKBOX_JOIN_TOKEN: JOIN_TOKEN,
        FORKBOX_HOST_ID: a.id,
        FORKBOX_ADVERTISE_URL: `http://${addr}:${AGENT_PORT}`,
        FORKBOX_DATA_DIR: a.dataDir,
        FORKBOX_TEMPLATES_DIR: a.templatesDir,
        FORKBOX_RUNSC_STATE_DIR: a.stateDir,
        FORKBOX_CGROUP_PARENT: cgroupParent,
        FORKBOX_NETWORK_SUBNET: a.subnet,
        FORKBOX_PREBUILD: 'base',
        FORKBOX_POOL_SIZE: '1',
        FORKBOX_LOG_LEVEL: 'warn',
        // one directory every agent mounts, as a fleet's NFS share would be
        FORKBOX_IMAGE_STORE: join(dir, 'image-store'),
      }
      // nsenter, not `ip netns exec`: that one also remounts /sys, hiding the cgroup hierarchies
      const proc = spawn(
        'nsenter',
        [
          `--net=/run/netns/${ns}`,
          process.execPath,
          join(ROOT, 'apps/cli/bin/forkbox.mjs'),
          'agent',
          '--port',
          String(AGENT_PORT),
        ],
        { env, stdio: ['ignore', 'pipe', 'pipe'] },
      )
      a.proc = proc
      proc.stderr?.pipe(log)
      await new Promise<void>((resolve, reject) => {
        let out = ''
        const timer = setTimeout(() => reject(new Error(`agent ${a.id} did not join in 120 s: ${out}`)), 120_000)
        proc.stdout?.on('data', (c: Buffer) => {
          log.write(c)
          out += c.toString()
          if (out.includes('joined')) {
            clearTimeout(timer)
            resolve()
          }
        })
        proc.once('exit', (code) => {
          clearTimeout(timer)
          reject(new Error(`agent ${a.id} exited (${code}) before it joined; see ${a.logFile}`))
        })
      })
    },
    async kill9() {
      const p = a.proc
      if (!p || p.exitCode !== null) return
      const exited = new Promise((r) => p.once('exit', r))
      // nsenter execs node: the pid is node's own
      p.kill('SIGKILL')
      await exited
      a.proc = null
    },
    async stop() {
      const p = a.proc
      if (!p || p.exitCode !== null) return
      const exited = new Promise((r) => p.once('exit', r))
      p.kill('SIGTERM')
      await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))])
      if (p.exitCode === null) p.kill('SIGKILL')
      a.proc = null
    },
  }
  return a
}

/** The sandbox ids agent `a` runs a container for (each container's bundle record names it). */
export function runningOn(a: FleetAgent): string[] {
  const dir = join(a.dataDir, 'sandboxes')
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((d) => {
    const record = join(dir, d, 'forkbox.json')
    return existsSync(record) ? [(JSON.parse(readFileSync(record, 'utf8')) as { id: string }).id] : []
  })
}

/** What an agent of the fleet left behind: all lists must be empty once it stopped. */
export function agentLeftovers(a: FleetAgent): Record<string, string[]> {
  const containers = existsSync(a.stateDir)
    ? (
        JSON.parse(execFileSync('runsc', [`--root=${a.stateDir}`, 'list', '--format=json']).toString() || '[]') ?? []
      ).map((c: { id: string }) => c.id)
    : []
  const sandboxDir = join(a.dataDir, 'sandboxes')
  const net = networkNames(`${a.cgroupParent}:${a.stateDir}`)
  const netns = existsSync('/run/netns') ? readdirSync('/run/netns').filter((n) => n.startsWith(net.netnsPrefix)) : []
  const ifaces = inNs(a.ns, 'ip', '-o', 'link')
    .split('\n')
    .map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((n) => n.startsWith(net.ifacePrefix))
  const rules = inNs(a.ns, 'nft', 'list', 'tables')
    .split('\n')
    .filter((l) => l.includes(net.table))
  return {
    containers,
    dirs: existsSync(sandboxDir) ? readdirSync(sandboxDir) : [],
    mounts: readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .filter((l) => l.includes(a.dataDir) || l.includes(a.stateDir)),
    cgroups: cgroupHierarchiesWith(a.cgroupParent),
    procs: execFileSync('ps', ['-eo', 'args='])
      .toString()
      .split('\n')
      .filter((l) => l.includes(`--root=${a.stateDir}`)),
    netns,
    ifaces,
    rules,
  }
}

export async function startFleet(opts: {
  replicas: number
  agents: number
  hostGraceSeconds?: number
  startingTimeoutSeconds?: number
  /** Agents (by index) with a templates dir of their own rather than the shared one. */
  ownTemplates?: number[]
}): Promise<Fleet> {
  const dir = mkdtempSync(join(tmpdir(), 'fbx-fleet-'))
  const pg = await startPostgres()
  const databaseUrl = await pg.database('fleet')
  const secretPath = join(dir, 'server.secret')
  writeFileSync(secretPath, execFileSync('head', ['-c', '32', '/dev/urandom']), { mode: 0o600 })
  const startReplica = () =>
    startServerHost({
      port: 0,
      host: '0.0.0.0',
      dataDir: mkdtempSync(join(dir, 'replica-')),
      databaseUrl,
      joinToken: JOIN_TOKEN,
      secretPath,
      hostGraceSeconds: opts.hostGraceSeconds ?? 6,
      startingTimeoutSeconds: opts.startingTimeoutSeconds ?? 300,
      freezeAfterSeconds: Number(process.env.FORKBOX_FREEZE_AFTER_SECONDS ?? 10),
      logLevel: process.env.FORKBOX_FLEET_LOG_LEVEL === 'info' ? 'info' : 'warn',
    })
  const replicas: ServerHost[] = []
  const agents: FleetAgent[] = []
  const fleet: Fleet = {
    pg,
    databaseUrl,
    replicas,
    agents,
    apiKey: '',
    secretPath,
    dir,
    startReplica,
    async startReplicaProcess() {
      const proc = spawn(
        process.execPath,
        [join(ROOT, 'apps/cli/bin/forkbox.mjs'), 'server', '--port', '0', '--host', '0.0.0.0'],
        {
          env: {
            ...process.env,
            FORKBOX_DATA_DIR: mkdtempSync(join(dir, 'replica-proc-')),
            FORKBOX_DATABASE_URL: databaseUrl,
            FORKBOX_JOIN_TOKEN: JOIN_TOKEN,
            FORKBOX_SECRET_FILE: secretPath,
            FORKBOX_HOST_GRACE_SECONDS: String(opts.hostGraceSeconds ?? 6),
            FORKBOX_STARTING_TIMEOUT_SECONDS: String(opts.startingTimeoutSeconds ?? 300),
            FORKBOX_LOG_LEVEL: 'warn',
            XDG_CONFIG_HOME: mkdtempSync(join(dir, 'replica-proc-config-')),
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      const log = createWriteStream(join(dir, `replica-${proc.pid}.log`))
      proc.stderr?.pipe(log)
      const url = await new Promise<string>((resolve, reject) => {
        let out = ''
        const timer = setTimeout(() => reject(new Error(`the replica did not start: ${out}`)), 60_000)
        proc.stdout?.on('data', (c: Buffer) => {
          out += c.toString()
          const m = /up at (http:\/\/\S+)/.exec(out)
          if (m?.[1]) {
            clearTimeout(timer)
            resolve(m[1])
          }
        })
        proc.once('exit', (code) => {
          clearTimeout(timer)
          reject(new Error(`the replica exited (${code}): ${out}`))
        })
      })
      return {
        url,
        port: Number(new URL(url).port),
        async kill9() {
          if (proc.exitCode !== null) return
          const exited = new Promise((r) => proc.once('exit', r))
          proc.kill('SIGKILL')
          await exited
        },
      }
    },
    async placements() {
      const c = new pgDriver.Client({ connectionString: databaseUrl })
      await c.connect()
      try {
        const r = await c.query(
          'select p.id, p.kind, p.host, s.state from placements p left join sandboxes s on s.id = p.id order by p.host',
        )
        return r.rows
      } finally {
        await c.end()
      }
    },
    async stop() {
      // replicas first: each finishes the stops it started before it lets go of the hosts
      for (const r of replicas) await r.close().catch(() => {})
      for (const a of agents) await a.stop()
      await pg.stop()
    },
  }
  try {
    for (let i = 0; i < opts.replicas; i++) replicas.push(await startReplica())
    fleet.apiKey = replicas[0]?.bootstrapKey ?? ''
    if (!fleet.apiKey) throw new Error('the first replica on an empty database must make the admin key')
    for (let n = 0; n < opts.agents; n++) agents.push(makeAgent(n, dir, opts.ownTemplates?.includes(n) ?? false))
    // each agent joins through a different replica
    await Promise.all(agents.map((a, n) => a.start(replicas[n % replicas.length]?.port ?? 0)))
  } catch (err) {
    await fleet.stop().catch(() => {})
    removeFleet(fleet)
    throw err
  }
  return fleet
}

/** Removes the namespaces, veths and dirs of a stopped fleet. */
export function removeFleet(f: Fleet): void {
  for (const a of f.agents) {
    try {
      ip('netns', 'del', a.ns)
    } catch {}
    rmSync(a.stateDir, { recursive: true, force: true })
  }
  rmSync(f.dir, { recursive: true, force: true })
}
