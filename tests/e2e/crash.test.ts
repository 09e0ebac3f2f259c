// After a crash (SIGKILL of the host process), the next start re-attaches the sandboxes that were
// running, with their processes, files and kernels; removes what nothing owns (pool sandboxes,
// half-made forks, half-written images, a build cut short); and nothing leaks.
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { describe, it } from 'node:test'
import { networkNames } from '@forkbox/agent'
import { startHost } from '@forkbox/host'
import { Sandbox } from '@forkbox/sdk'
import { cgroupHierarchiesWith, networkLeftovers, sharedTemplatesDir as templatesDir, testSubnet } from './harness.ts'

/** A host in a child process (fixtures/crash-host.ts) on fresh dirs; its stdout comes line by line. */
function crashHost(tag: string, mode?: 'fork' | 'hibernate' | 'build') {
  const dataDir = mkdtempSync(join(tmpdir(), 'forkbox-crash-'))
  const env = {
    ...process.env,
    CRASH_DATA_DIR: dataDir,
    CRASH_STATE_DIR: `/run/${tag}`,
    CRASH_CGROUP_PARENT: tag,
    CRASH_SUBNET: testSubnet(subnetSalt(tag)),
  }
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', new URL('./fixtures/crash-host.ts', import.meta.url).pathname],
    {
      env: mode ? { ...env, CRASH_MODE: mode } : env,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const line = await lines.next()
    if (line.done) throw new Error(`crash host exited early (${child.exitCode})`)
    return String(line.value)
  }
  const kill = async () => {
    child.kill('SIGKILL')
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r))
  }
  return { dataDir, next, kill }
}

/** Each crash scenario's hosts on a block of their own (the crashed one's may not be swept yet). */
const subnetSalt = (tag: string) =>
  tag.includes('fork') ? 11 : tag.includes('hibernate') ? 23 : tag.includes('build') ? 37 : 0

/** No runsc process, cgroup, netns, veth or nft rule of the hosts tagged `tag` is left. */
async function assertNothingLeft(tag: string): Promise<void> {
  const procs = spawn('ps', ['-eo', 'args='])
  let out = ''
  for await (const c of procs.stdout) out += c
  assert.ok(!out.includes(`--root=/run/${tag}`), 'a runsc process of the crashed host is still running')
  assert.deepEqual(cgroupHierarchiesWith(tag), [])
  assert.deepEqual(networkLeftovers(tag, `/run/${tag}`), { netns: [], ifaces: [], rules: [] })
}

/** The next host on the crashed one's dirs. */
function restartHost(dataDir: string, tag: string, poolSize?: number) {
  return startHost({
    port: 0,
    dataDir,
    templatesDir,
    runscStateDir: `/run/${tag}`,
    cgroupParent: tag,
    logLevel: 'silent',
    poolSize,
    // the crashed host's block: the re-attached sandboxes keep their slots
    networkSubnet: testSubnet(subnetSalt(tag)),
  })
}

describe('crash recovery', () => {
  it('a host killed with SIGKILL while its sandbox is frozen: the sandbox runs on under the next one, the rest is removed', async () => {
    const tag = `fbx-crash-${process.pid}`
    const crashed = crashHost(tag)
    const { dataDir } = crashed
    const { id, key, frozen } = JSON.parse(await crashed.next()) as { id: string; key: string; frozen: boolean }
    assert.ok(frozen, 'the sandbox was frozen when its host died')
    // the sandbox and the crashed host's warm pool
    const leftBehind = readdirSync(join(dataDir, 'sandboxes'))
    assert.ok(leftBehind.includes(id))
    await crashed.kill()

    const host = await restartHost(dataDir, tag)
    try {
      assert.equal(host.bootstrapKey, null)
      const conn = { url: host.url, apiKey: key }
      const sbx = await Sandbox.connect(id, conn)
      assert.equal(sbx.info.state, 'running')
      // its process, its file and its kernel's memory all came through
      assert.match((await sbx.exec(['ps', '-eo', 'args'])).stdout, /sleep 1000/)
      assert.equal(await sbx.files.read('/work/before-crash.txt'), 'still here')
      assert.equal((await sbx.runCode('survivor')).text, '42')
      const events = (await (
        await fetch(`${host.url}/v1/sandboxes/${id}/events`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as { events: { type: string }[] }
      assert.ok(events.events.some((e) => e.type === 're-attached'))
      // its network policy is in force again under the new host's rules
      assert.deepEqual(sbx.info.network.allowOut, ['203.0.113.7'])
      const table = networkNames(`${tag}:/run/${tag}`).table
      assert.match(execFileSync('nft', ['list', 'table', 'inet', table]).toString(), /203\.0\.113\.7/)
      // the crashed host's pool sandboxes are gone; only the re-attached one is left
      const now = readdirSync(join(dataDir, 'sandboxes'))
      assert.deepEqual(
        leftBehind.filter((d) => now.includes(d)),
        [id],
      )
      // a new sandbox still works on the recovered host
      await using fresh = await Sandbox.create(conn)
      assert.equal((await fresh.exec(['echo', 'ok'])).stdout, 'ok\n')
      await sbx.kill()
    } finally {
      await host.close()
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(`/run/${tag}`, { recursive: true, force: true })
    }
    // the crashed host's spare slots and the re-attached sandbox's are gone too
    await assertNothingLeft(tag)
  })

  it('a host killed mid-build: the build is failed with a reason, and no build sandbox, mount or temp layer is left', async () => {
    const tag = `fbx-crash-build-${process.pid}`
    const crashed = crashHost(tag, 'build')
    const { dataDir } = crashed
    const { id, key, pid } = JSON.parse(await crashed.next()) as { id: string; key: string; pid: number }
    assert.equal(await crashed.next(), 'started')
    const layers = join(templatesDir, '.layers')
    const theirs = () => [
      ...readdirSync(layers).filter((n) => n.startsWith(`tmp-${pid}-`)),
      ...readFileSync('/proc/mounts', 'utf8')
        .split('\n')
        .filter((l) => l.includes(`${layers}/tmp-${pid}-`)),
    ]
    assert.ok(theirs().length > 0, "the build's step is mounted in a temp layer")
    await crashed.kill()

    const host = await restartHost(dataDir, tag, 0)
    try {
      const res = await fetch(`${host.url}/v1/builds/${id}`, { headers: { authorization: `Bearer ${key}` } })
      const build = (await res.json()) as { status: string; error: { message: string } | null }
      assert.equal(build.status, 'failed')
      assert.match(build.error?.message ?? '', /restarted during the build/)
      assert.deepEqual(theirs(), [])
      // the template has no version to create from; a new build of the name works
      const create = await fetch(`${host.url}/v1/sandboxes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ template: 'cut-short' }),
      })
      assert.equal(((await create.json()) as { error: { code: string } }).error.code, 'TEMPLATE_NOT_FOUND')
    } finally {
      await host.close()
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(`/run/${tag}`, { recursive: true, force: true })
    }
    await assertNothingLeft(tag)
  })

  for (const mode of ['fork', 'hibernate'] as const) {
    it(`a host killed mid-${mode} leaves no half-made sandbox or image once the next one starts`, async () => {
      const tag = `fbx-crash-${mode}-${process.pid}`
      const crashed = crashHost(tag, mode)
      const { dataDir } = crashed
      const { id, key } = JSON.parse(await crashed.next()) as { id: string; key: string }
      assert.equal(await crashed.next(), 'started')
      // the checkpoint of ~100 MB is under way
      await new Promise((r) => setTimeout(r, 300))
      await crashed.kill()

      const host = await restartHost(dataDir, tag, 0)
      try {
        const conn = { url: host.url, apiKey: key }
        const all = await Sandbox.list(conn)
        assert.ok(all.some((s) => s.id === id))
        const source = all.find((s) => s.id === id)
        // the source is never lost: running on (re-attached), or hibernated with a whole image
        assert.ok(source?.state === 'running' || source?.state === 'hibernated', `source is ${source?.state}`)
        for (const s of all.filter((s) => s.id !== id)) {
          // a fork cut short is errored, never left starting or half there
          assert.equal(s.state, 'errored', `${s.id} is ${s.state}`)
          assert.equal(s.errorReason, 'runtime_failed')
        }
        // no image the records do not name, no half-written one, no bundle dir, no container
        const snapshots = existsSync(join(dataDir, 'snapshots')) ? readdirSync(join(dataDir, 'snapshots')) : []
        assert.ok(
          snapshots.every((n) => n.startsWith('hib-') && !n.includes('.tmp-')),
          snapshots.join(','),
        )
        assert.equal(all.filter((s) => s.state === 'hibernated').length, snapshots.length)
        // a fork whose restore had begun is re-attached, then stopped by the control plane's
        // recovery; its bundle dir goes with the teardown, which stop() leaves to the background
        const wanted = source?.state === 'running' ? [id] : []
        for (let i = 0; i < 100 && readdirSync(join(dataDir, 'sandboxes')).length !== wanted.length; i++)
          await new Promise((r) => setTimeout(r, 200))
        assert.deepEqual(readdirSync(join(dataDir, 'sandboxes')), wanted)
        // either way the source answers with all its state
        const sbx = await Sandbox.connect(id, conn)
        assert.match((await sbx.exec(['ps', '-eo', 'args'])).stdout, /python3 -c/)
        assert.equal(await sbx.files.read('/work/before-crash.txt'), 'still here')
        assert.equal((await sbx.runCode('survivor')).text, '42')
        await sbx.kill()
      } finally {
        await host.close()
        rmSync(dataDir, { recursive: true, force: true })
        rmSync(`/run/${tag}`, { recursive: true, force: true })
      }
      await assertNothingLeft(tag)
    })
  }
})
