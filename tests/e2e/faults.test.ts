// Fault injection (issue 21): a sandbox's runsc processes killed -9, its guest (the container's
// init) killed, during create, exec, fork, hibernate and wake; the data dir's disk full; the
// host's clock stepped past TTLs; the host process killed -9 during an exec. Afterwards every call
// has ended with a clear code within its deadline, the states say what happened, nothing is lost,
// duplicated or leaked (crash.test.ts has the host killed mid-fork, -hibernate and -build).
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { describe, it } from 'node:test'
import { ForkboxClient, type ForkboxError, Sandbox } from '@forkbox/sdk'
import {
  cgroupHierarchiesWith,
  containerOf,
  leftovers,
  NOTHING_LEFT,
  networkLeftovers,
  startTestHost,
  testSubnet,
  until,
  useTestHost,
} from './harness.ts'

let bystander: Sandbox
const host = useTestHost({
  setup: async (t) => {
    bystander = await Sandbox.create({ ...t.conn })
  },
  teardown: async () => {
    // whatever happened to the others, this one never noticed
    assert.equal((await bystander.exec(['echo', 'unharmed'])).stdout, 'unharmed\n')
    await bystander.kill()
  },
})
const conn = () => ({ ...host().conn, maxRetries: 0 })

/** runsc processes of this host, by the container each works for. */
function runscProcs(stateDir: string): { pid: number; container: string | null }[] {
  const out: { pid: number; container: string | null }[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')
      if (!args.includes(`--root=${stateDir}`)) continue
      const bundle = args.find((a) => a.startsWith('--bundle='))
      out.push({ pid: Number(name), container: bundle ? (bundle.split('/').at(-1) ?? null) : null })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

function kill9(pids: number[]): number {
  let n = 0
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
      n++
    } catch {
      // gone
    }
  }
  return n
}

type Fault = 'runsc' | 'guest'

/** Ends a container: its runsc processes killed -9, or its guest (the container's init) killed through runsc. */
function strike(container: string, how: Fault): number {
  const { stateDir } = host()
  if (how === 'runsc')
    return kill9(
      runscProcs(stateDir)
        .filter((p) => p.container === container)
        .map((p) => p.pid),
    )
  try {
    execFileSync('runsc', [`--root=${stateDir}`, 'kill', container, 'KILL'], { stdio: 'ignore', timeout: 5000 })
    return 1
  } catch {
    // not created yet, or gone
    return 0
  }
}

/** Strikes every container that was not there before, as they appear, until `done` settles. */
async function strikeNewContainers(done: Promise<unknown>, how: Fault): Promise<number> {
  const { stateDir } = host()
  const before = new Set(runscProcs(stateDir).map((p) => p.container))
  let settled = false
  void done.finally(() => {
    settled = true
  })
  let struck = 0
  while (!settled) {
    // not the warm pool's refill, which may start at the same moment: the call's own containers
    const fresh = new Set(
      runscProcs(stateDir).flatMap((p) =>
        p.container && !before.has(p.container) && !p.container.startsWith('pool-') ? [p.container] : [],
      ),
    )
    for (const c of fresh) struck += strike(c, how)
    await new Promise((r) => setTimeout(r, 5))
  }
  return struck
}

/** Strikes sandbox `id`'s container. */
function strikeSandbox(id: string, how: Fault = 'runsc'): number {
  const container = containerOf(host().dataDir, id)
  assert.ok(container, `no container of ${id}`)
  return strike(container, how)
}

/** The call's outcome and how long it took. */
async function timed<T>(p: Promise<T>): Promise<{ ms: number; value?: T; error?: ForkboxError }> {
  const t0 = performance.now()
  try {
    const value = await p
    return { ms: performance.now() - t0, value }
  } catch (e) {
    return { ms: performance.now() - t0, error: e as ForkboxError }
  }
}

/** No sandbox of the key twice, none left starting. */
async function assertConsistent(): Promise<void> {
  const all = await Sandbox.list(conn())
  assert.equal(new Set(all.map((s) => s.id)).size, all.length, 'a sandbox listed twice')
  await until(
    'no sandbox left starting',
    async () => !(await Sandbox.list(conn())).some((s) => s.state === 'starting'),
    30_000,
  )
}

describe('faults', () => {
  it('runsc killed -9 during an exec: the exec ends SANDBOX_ERRORED at once, the state says why', async () => {
    const sbx = await Sandbox.create(conn())
    const call = timed(sbx.exec('sleep 30', { timeoutSeconds: 60 }))
    await new Promise((r) => setTimeout(r, 500))
    assert.ok(strikeSandbox(sbx.id) > 0)
    const r = await call
    assert.equal(r.error?.code, 'SANDBOX_ERRORED')
    assert.ok(r.ms < 10_000, `ended after ${r.ms} ms`)
    const info = await sbx.getInfo()
    assert.equal(info.state, 'errored')
    assert.equal(info.errorReason, 'guest_exited')
    // later calls say the same at once
    assert.equal((await timed(sbx.exec(['true']))).error?.code, 'SANDBOX_ERRORED')
    await assertConsistent()
  })

  it('the guest (the container init) killed during an exec: SANDBOX_ERRORED guest_exited, at once', async () => {
    const sbx = await Sandbox.create(conn())
    const container = containerOf(host().dataDir, sbx.id) as string
    const call = timed(sbx.exec('sleep 30', { timeoutSeconds: 60 }))
    await new Promise((r) => setTimeout(r, 500))
    execFileSync('runsc', [`--root=${host().stateDir}`, 'kill', container, 'KILL'])
    const r = await call
    assert.equal(r.error?.code, 'SANDBOX_ERRORED')
    assert.ok(r.ms < 10_000, `ended after ${r.ms} ms`)
    assert.equal((await sbx.getInfo()).errorReason, 'guest_exited')
    await assertConsistent()
  })

  for (const how of ['runsc', 'guest'] as const) {
    const what = how === 'runsc' ? 'runsc killed -9' : 'the guest killed'
    it(`${what} as a create starts it: the create fails with a code, and its record is errored, never starting`, async () => {
      // resources of its own: a boot of a container of its own, not a pooled one
      const memoryMB = how === 'runsc' ? 640 : 672
      const call = timed(Sandbox.create({ ...conn(), resources: { memoryMB } }))
      const killed = await strikeNewContainers(call, how)
      const r = await call
      assert.ok(killed > 0, 'no runsc process was there to kill')
      assert.ok(r.error, 'the create succeeded')
      assert.ok(['INTERNAL', 'SANDBOX_ERRORED'].includes(r.error.code), r.error.code)
      assert.ok(r.ms < 45_000, `ended after ${r.ms} ms`)
      await assertConsistent()
      const errored = (await Sandbox.list(conn())).filter(
        (s) => s.state === 'errored' && s.resources.memoryMB === memoryMB,
      )
      assert.equal(errored.length, 1)
      assert.equal(errored[0]?.errorReason, 'runtime_failed')
    })

    it(`${what} as forks start: the fork fails as a whole, no fork is left half-made, the source runs on`, async () => {
      const src = await Sandbox.create(conn())
      await src.files.write('/work/mark.txt', 'source')
      const call = timed(src.fork({ count: 2 }))
      const killed = await strikeNewContainers(call, how)
      const r = await call
      assert.ok(killed > 0)
      assert.ok(r.error, 'the fork succeeded')
      assert.ok(r.ms < 45_000, `ended after ${r.ms} ms`)
      await assertConsistent()
      const forks = (await Sandbox.list(conn())).filter(
        (s) => s.metadata && s.id !== src.id && s.createdAt > src.info.createdAt,
      )
      for (const f of forks) assert.ok(['errored', 'killed'].includes(f.state), `fork ${f.id} is ${f.state}`)
      assert.equal(await src.files.read('/work/mark.txt'), 'source')
      await src.kill()
    })

    it(`${what} mid-hibernate: the call ends with a code, and the sandbox is either hibernated whole or errored, never lost`, async () => {
      const sbx = await Sandbox.create(conn())
      await sbx.exec(
        `setsid python3 -c "import time; d = b'x' * (80 * 1024 * 1024); time.sleep(600)" > /dev/null 2>&1 < /dev/null &`,
      )
      await new Promise((r) => setTimeout(r, 1000))
      const call = timed(sbx.hibernate())
      await new Promise((r) => setTimeout(r, 80))
      strikeSandbox(sbx.id, how)
      const r = await call
      assert.ok(r.ms < 30_000, `ended after ${r.ms} ms`)
      // a sandbox whose runsc died is reported by its exit, which may land just after the call ends
      await until('the sandbox is hibernated or errored', async () =>
        ['hibernated', 'errored'].includes((await sbx.getInfo()).state),
      )
      const info = await sbx.getInfo()
      if (info.state === 'hibernated') assert.equal((await sbx.exec(['echo', 'woke'])).stdout, 'woke\n')
      else {
        assert.equal(info.state, 'errored')
        assert.ok(r.error, 'hibernate answered success for a sandbox that died')
      }
      await assertConsistent()
      await sbx.kill()
    })

    it(`${what} as a wake restores: the call fails with a code, the sandbox stays hibernated, and the next call wakes it`, async () => {
      const sbx = await Sandbox.create(conn())
      await sbx.files.write('/work/kept.txt', 'kept')
      await sbx.hibernate()
      const call = timed(sbx.exec(['echo', 'hi']))
      const killed = await strikeNewContainers(call, how)
      const r = await call
      assert.ok(killed > 0)
      assert.ok(r.error, 'the wake succeeded')
      assert.ok(r.ms < 45_000, `ended after ${r.ms} ms`)
      assert.equal((await sbx.getInfo()).state, 'hibernated')
      assert.equal(await sbx.files.read('/work/kept.txt'), 'kept')
      assert.equal((await sbx.getInfo()).state, 'running')
      await assertConsistent()
      await sbx.kill()
    })
  }

  it("the data dir's disk full: a snapshot fails NO_SPACE with nothing half-written; the sandbox and the store carry on", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forkbox-full-'))
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=700', 'tmpfs', dir])
    let t: Awaited<ReturnType<typeof startTestHost>> | undefined
    try {
      // its own runsc root and cgroup: this file's main host must not see it (nor reconcile it away)
      const tag = `fbx-full-${process.pid}`
      const started = await startTestHost({
        dataDir: dir,
        runscStateDir: `/run/${tag}`,
        cgroupParent: tag,
        networkSubnet: testSubnet(7),
      })
      // startTestHost made a data dir this host does not use
      rmSync(started.dataDir, { recursive: true, force: true })
      t = { ...started, dataDir: dir, stateDir: `/run/${tag}`, cgroupParent: tag }
      const c = { ...t.conn, maxRetries: 0 }
      const sbx = await Sandbox.create(c)
      // leave ~6 MB: enough for the database, not for an image (~19 MB for a fresh base sandbox)
      const free = () => {
        const out = execFileSync('df', ['-B1', '--output=avail', dir]).toString().trim().split('\n')[1]
        return Number(out)
      }
      execFileSync('fallocate', ['-l', String(free() - 6 * 1024 * 1024), join(dir, 'filler')])
      const r = await timed(sbx.snapshot())
      assert.equal(r.error?.code, 'NO_SPACE')
      assert.equal(r.error?.status, 507)
      assert.ok(r.ms < 30_000)
      const images = existsSync(join(dir, 'snapshots')) ? readdirSync(join(dir, 'snapshots')) : []
      assert.deepEqual(images, [], 'an image was left half-written')
      // the sandbox runs on, and the store still takes writes
      assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
      await sbx.setTimeout(600)
      // a hibernate meets the same full disk: refused, and the sandbox keeps running
      const h = await timed(sbx.hibernate())
      assert.equal(h.error?.code, 'NO_SPACE')
      assert.equal((await sbx.getInfo()).state, 'running')
      // room again: it works
      rmSync(join(dir, 'filler'))
      const snap = await sbx.snapshot()
      assert.ok(snap.sizeBytes > 0)
      await new ForkboxClient(c).snapshots.delete(snap.id)
      await sbx.kill()
    } finally {
      // the tmpfs is unmounted whatever failed: the leak check is made before, judged after
      let left: Record<string, string[]> | undefined
      if (t) {
        await t.stop()
        left = leftovers(t)
        // the data dir's own tmpfs is the test's, not a leftover
        left.mounts = (left.mounts ?? []).filter((m) => !m.includes(dir))
      }
      execFileSync('umount', [dir])
      rmSync(dir, { recursive: true, force: true })
      if (t) rmSync(t.stateDir, { recursive: true, force: true })
      if (left) assert.deepEqual(left, NOTHING_LEFT)
    }
  })

  /**
   * A host in a process of its own (fixtures/fault-host.ts), on `dataDir` (default: a fresh one),
   * its clock steppable with SIGUSR2; `key` is its admin key when the data dir was fresh.
   */
  async function childHost(tag: string, salt: number, dataDir = mkdtempSync(join(tmpdir(), 'forkbox-fault-'))) {
    const env = {
      ...process.env,
      FAULT_DATA_DIR: dataDir,
      FAULT_STATE_DIR: `/run/${tag}`,
      FAULT_CGROUP_PARENT: tag,
      FAULT_SUBNET: testSubnet(salt),
    }
    const fixture = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--import', fixture('clock-step.ts'), fixture('fault-host.ts')],
      { env, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    const exited = new Promise((r) => child.once('exit', r))
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    const first = await lines.next()
    if (first.done) throw new Error('the fault host exited before it was up')
    const { url, key } = JSON.parse(String(first.value)) as { url: string; key: string | null }
    return {
      conn: { url, apiKey: key ?? '', maxRetries: 0 },
      dataDir,
      step: () => child.kill('SIGUSR2'),
      kill9: async () => {
        child.kill('SIGKILL')
        await exited
      },
      stop: async () => {
        child.kill('SIGTERM')
        await exited
      },
    }
  }

  async function assertNothingLeftOf(tag: string, dataDir: string): Promise<void> {
    const ps = execFileSync('ps', ['-eo', 'args=']).toString()
    assert.ok(!ps.includes(`--root=/run/${tag}`), 'a runsc process is left')
    assert.deepEqual(cgroupHierarchiesWith(tag), [])
    assert.deepEqual(networkLeftovers(tag, `/run/${tag}`), { netns: [], ifaces: [], rules: [] })
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(`/run/${tag}`, { recursive: true, force: true })
  }

  it("the host's clock stepped an hour forward: TTLs past are enforced once (killed, or hibernated), the rest untouched", async () => {
    const tag = `fbx-clock-${process.pid}`
    const h = await childHost(tag, 13)
    try {
      const ends = await Sandbox.create({ ...h.conn, ttlSeconds: 600 })
      const sleeps = await Sandbox.create({ ...h.conn, ttlSeconds: 600, onTimeout: 'hibernate' })
      const lasts = await Sandbox.create({ ...h.conn, ttlSeconds: 7200 })
      h.step()
      await until('the stepped clock passed the TTLs', async () => (await ends.getInfo()).state === 'killed', 20_000)
      await until(
        'the hibernating TTL hibernated it',
        async () => (await sleeps.getInfo()).state === 'hibernated',
        30_000,
      )
      assert.equal((await lasts.getInfo()).state, 'running')
      assert.equal((await lasts.exec(['echo', 'on'])).stdout, 'on\n')
      // nothing twice, nothing lost; a wake gives the hibernated one its TTL again
      const all = await Sandbox.list(h.conn)
      assert.deepEqual(all.map((s) => s.id).sort(), [ends.id, sleeps.id, lasts.id].sort())
      assert.equal((await sleeps.exec(['echo', 'woke'])).stdout, 'woke\n')
      assert.ok(
        Date.parse((await sleeps.getInfo()).expiresAt) > Date.now() + 3600_000,
        'its TTL runs on the stepped clock',
      )
      await Promise.all([sleeps.kill(), lasts.kill()])
    } finally {
      await h.stop()
    }
    await assertNothingLeftOf(tag, h.dataDir)
  })

  for (const during of ['create', 'wake'] as const) {
    it(`the host process killed -9 during a ${during}: after a restart nothing is left starting or half-made, and the sandbox is not lost`, async () => {
      const tag = `fbx-hostkill-${during}-${process.pid}`
      const h = await childHost(tag, during === 'create' ? 19 : 23)
      let id: string | undefined
      if (during === 'wake') {
        const sbx = await Sandbox.create(h.conn)
        await sbx.files.write('/work/kept.txt', 'kept')
        await sbx.hibernate()
        id = sbx.id
        void sbx.exec(['true']).catch(() => {})
      } else void Sandbox.create({ ...h.conn, resources: { memoryMB: 704 } }).catch(() => {})
      // the call is under way (a cold boot, a restore)
      await new Promise((r) => setTimeout(r, during === 'create' ? 300 : 100))
      await h.kill9()
      const again = await childHost(tag, during === 'create' ? 19 : 23, h.dataDir)
      const c = { ...again.conn, apiKey: h.conn.apiKey }
      try {
        const all = await Sandbox.list(c)
        assert.ok(!all.some((s) => s.state === 'starting'), JSON.stringify(all.map((s) => s.state)))
        assert.equal(new Set(all.map((s) => s.id)).size, all.length)
        if (during === 'create') {
          // made before the kill and re-attached, or cut short and errored; never half there
          for (const s of all)
            assert.ok(
              s.state === 'running' || (s.state === 'errored' && s.errorReason === 'runtime_failed'),
              `${s.id} is ${s.state}`,
            )
          for (const s of all.filter((s) => s.state === 'running')) await (await Sandbox.connect(s.id, c)).kill()
        } else {
          const s = all.find((s) => s.id === id)
          assert.ok(s?.state === 'hibernated' || s?.state === 'running', `the sandbox is ${s?.state}`)
          const sbx = await Sandbox.connect(id as string, c)
          assert.equal(await sbx.files.read('/work/kept.txt'), 'kept')
          await sbx.kill()
        }
      } finally {
        await again.stop()
      }
      await assertNothingLeftOf(tag, h.dataDir)
    })
  }

  it('the host process killed -9 during an exec: the call fails with a code at once; after a restart the sandbox runs on', async () => {
    const tag = `fbx-hostkill-${process.pid}`
    const h = await childHost(tag, 17)
    const sbx = await Sandbox.create(h.conn)
    await sbx.files.write('/work/before.txt', 'before')
    const call = timed(sbx.exec('sleep 30', { timeoutSeconds: 60 }))
    await new Promise((r) => setTimeout(r, 500))
    await h.kill9()
    const r = await call
    assert.ok(r.error, 'the exec succeeded')
    assert.equal(r.error.code, 'CONNECTION_ERROR')
    assert.ok(r.ms < 5_000)
    // the next host on the same dirs takes it back
    const again = await childHost(tag, 17, h.dataDir)
    try {
      const back = await Sandbox.connect(sbx.id, { ...again.conn, apiKey: h.conn.apiKey })
      assert.equal(back.info.state, 'running')
      assert.equal(await back.files.read('/work/before.txt'), 'before')
      const all = await Sandbox.list({ ...again.conn, apiKey: h.conn.apiKey })
      assert.deepEqual(
        all.map((s) => s.id),
        [sbx.id],
      )
      await back.kill()
    } finally {
      await again.stop()
    }
    await assertNothingLeftOf(tag, h.dataDir)
  })
})
