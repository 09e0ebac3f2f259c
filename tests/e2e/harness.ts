// Starts a real single-host forkbox (real runsc) with its own state, and checks nothing leaks.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before } from 'node:test'
import { defaultAgentConfig, networkNames } from '@forkbox/agent'
import { type Host, type HostOptions, startHost } from '@forkbox/host'
import type { ConnectionOptions } from '@forkbox/sdk'

export interface TestHost {
  host: Host
  conn: ConnectionOptions & { apiKey: string; url: string }
  dataDir: string
  stateDir: string
  cgroupParent: string
  stop(): Promise<void>
}

/**
 * A network block for a test host of this process: never `forkbox up`'s default (10.213.0.0/16),
 * so the tests pass while the README's first command is running; `salt` tells apart several hosts
 * of one process that must not share a block.
 */
export function testSubnet(salt = 0): string {
  return `10.${170 + ((process.pid + salt) % 40)}.0.0/16`
}

/** The baked templates every test host shares (prepare.ts fills it): FORKBOX_TEMPLATES_DIR, else the agent's default. */
export const sharedTemplatesDir = process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir

export async function startTestHost(opts: Partial<HostOptions> = {}): Promise<TestHost> {
  const dataDir = mkdtempSync(join(tmpdir(), 'forkbox-e2e-'))
  const tag = `fbx-e2e-${process.pid}`
  const stateDir = `/run/${tag}`
  const host = await startHost({
    port: 0,
    dataDir,
    templatesDir: sharedTemplatesDir,
    runscStateDir: stateDir,
    cgroupParent: tag,
    logLevel: 'warn',
    // other templates bake and fill their pools on first use
    prebuild: ['base'],
    // a block of its own: test hosts of other processes may run at the same time
    networkSubnet: testSubnet(),
    // pools stay at their floor: the tests' bursts of creates would grow them, and the restores
    // would compete with the tests for 2 cores (pool.test.ts tests the growing)
    poolMax: 0,
    ...opts,
  })
  if (!host.bootstrapKey) throw new Error('a fresh data dir must yield a bootstrap key')
  return {
    host,
    conn: { url: host.url, apiKey: host.bootstrapKey },
    dataDir,
    stateDir,
    cgroupParent: tag,
    async stop() {
      await host.close()
    },
  }
}

/** The runsc container (its bundle dir's name) of sandbox `id` on the host with `dataDir`; a claimed pool sandbox keeps its pool name. */
export function containerOf(dataDir: string, id: string): string | undefined {
  const dir = join(dataDir, 'sandboxes')
  return readdirSync(dir).find((name) => {
    const record = join(dir, name, 'forkbox.json')
    return existsSync(record) && JSON.parse(readFileSync(record, 'utf8')).id === id
  })
}

/** The cgroup hierarchies holding `parent`: v2, or v1's one dir per controller plus name=systemd. */
export function cgroupHierarchiesWith(parent: string): string[] {
  return ['', ...readdirSync('/sys/fs/cgroup')].filter((c) => existsSync(join('/sys/fs/cgroup', c, parent)))
}

/** The network namespaces, host interfaces and nftables table of a host's agent still there. */
export function networkLeftovers(cgroupParent: string, stateDir: string) {
  const net = networkNames(`${cgroupParent}:${stateDir}`)
  const netns = existsSync('/run/netns') ? readdirSync('/run/netns').filter((n) => n.startsWith(net.netnsPrefix)) : []
  // the pull network's resolv.conf (ip netns exec reads it from here)
  const netnsEtc = existsSync('/etc/netns')
    ? readdirSync('/etc/netns').filter((n) => n.startsWith(net.netnsPrefix))
    : []
  const ifaces = readdirSync('/sys/class/net').filter((n) => n.startsWith(net.ifacePrefix))
  const rules = execFileSync('nft', ['list', 'tables'])
    .toString()
    .split('\n')
    .filter((l) => l.includes(net.table))
  return { netns: [...netns, ...netnsEtc.map((n) => `/etc/netns/${n}`)], ifaces, rules }
}

/** Everything a sandbox of this host could leave behind; all lists must be empty. */
export function leftovers(t: TestHost): Record<string, string[]> {
  const containers = existsSync(t.stateDir)
    ? (
        JSON.parse(execFileSync('runsc', [`--root=${t.stateDir}`, 'list', '--format=json']).toString() || '[]') ?? []
      ).map((c: { id: string }) => c.id)
    : []
  const sandboxDir = join(t.dataDir, 'sandboxes')
  const dirs = existsSync(sandboxDir) ? readdirSync(sandboxDir) : []
  const mounts = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.includes(t.dataDir) || l.includes(t.stateDir))
  const cgroups = cgroupHierarchiesWith(t.cgroupParent)
  const procs = execFileSync('ps', ['-eo', 'args='])
    .toString()
    .split('\n')
    .filter((l) => l.includes(`--root=${t.stateDir}`))
  const snapshotDir = join(t.dataDir, 'snapshots')
  const snapshots = existsSync(snapshotDir) ? readdirSync(snapshotDir) : []
  return { containers, dirs, mounts, cgroups, procs, snapshots, ...networkLeftovers(t.cgroupParent, t.stateDir) }
}

export const NOTHING_LEFT = {
  containers: [],
  dirs: [],
  mounts: [],
  cgroups: [],
  procs: [],
  snapshots: [],
  netns: [],
  ifaces: [],
  rules: [],
}

export function cleanupDataDir(t: TestHost): void {
  rmSync(t.dataDir, { recursive: true, force: true })
  rmSync(t.stateDir, { recursive: true, force: true })
}

/**
 * Registers a host for the whole test file: started before the tests, and after them stopped
 * and checked for leaks (no containers, dirs, mounts, cgroups or runsc processes).
 * `setup`/`teardown` run on the started host, around the tests.
 */
/** A key in E2B's form (`e2b_<hex>`), issued by forkbox's own API with the host's admin key. */
export async function issueE2bKey(t: TestHost, name: string): Promise<string> {
  const res = await fetch(`${t.conn.url}/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.conn.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, format: 'e2b' }),
  })
  return ((await res.json()) as { key: string }).key
}

export function useTestHost(
  hooks: {
    setup?: (t: TestHost) => Promise<void>
    teardown?: (t: TestHost) => Promise<void>
    options?: () => Partial<HostOptions>
  } = {},
): () => TestHost {
  let t: TestHost | undefined
  before(async () => {
    t = await startTestHost(hooks.options?.())
    await hooks.setup?.(t)
  })
  after(async () => {
    if (!t) return
    await hooks.teardown?.(t)
    await t.stop()
    assert.deepEqual(leftovers(t), NOTHING_LEFT)
    cleanupDataDir(t)
  })
  return () => {
    if (!t) throw new Error('the test host is not started')
    return t
  }
}

/** Waits (polling every 100 ms) until `check` holds; fails naming `what` after `timeoutMs`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** A template build as its log's `end` event gives it. */
export interface EndedBuild {
  id: string
  status: string
  version: number
  error: { code: string; message: string; details?: Record<string, unknown> } | null
}

/** Follows a build's log (SSE) to its end: the log's lines and the build as it ended. */
export async function followBuild(
  url: string,
  key: string,
  buildId: string,
): Promise<{ build: EndedBuild; lines: string[] }> {
  const res = await fetch(`${url}/v1/builds/${buildId}/logs`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
  })
  const lines: string[] = []
  let end: EndedBuild | undefined
  for (const block of (await res.text()).split('\n\n')) {
    const event = /^event: (.*)$/m.exec(block)?.[1]
    const data = /^data: (.*)$/m.exec(block)?.[1]
    if (event === 'log' && data) lines.push(JSON.parse(data).message)
    if (event === 'end' && data) end = JSON.parse(data)
  }
  if (!end) throw new Error(`the log of ${buildId} ended without an end event:\n${lines.join('\n')}`)
  return { build: end, lines }
}
