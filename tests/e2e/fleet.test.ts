// A fleet on real runsc and a real Postgres: two control-plane replicas, three host agents each
// in a network namespace of its own. Creates spread; a sandbox made through one replica is
// served through the other (exec, streams, files, terminal, exposed port); events cross
// replicas; a TTL expires once; nothing is left on any host afterwards.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ForkboxClient, type PtyHandle, Sandbox, type SandboxEvent } from '@forkbox/sdk'
import { agentLeftovers, type Fleet, removeFleet, runningOn, startFleet } from './fleet-harness.ts'
import { until } from './harness.ts'

let fleet: Fleet

const conn = (replica: number) => ({ url: fleet.replicas[replica]?.url ?? '', apiKey: fleet.apiKey })

function hosts(replica = 0) {
  return new ForkboxClient(conn(replica)).hosts.list()
}

/** GET through replica `replica`'s exposed-port proxy (the sandbox's own origin, by Host header). */
function viaPort(replica: number, id: string, port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: fleet.replicas[replica]?.port,
        path,
        headers: { host: `${port}-${id}.localhost`, authorization: `Bearer ${fleet.apiKey}` },
      },
      (res) => {
        let body = ''
        res.on('data', (c: Buffer) => {
          body += c.toString()
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

before(async () => {
  // h2 shares no templates dir with the others: a template a user built elsewhere is copied to it
  fleet = await startFleet({ replicas: 2, agents: 3, startingTimeoutSeconds: 15, ownTemplates: [2] })
})

after(async () => {
  if (!fleet) return
  await fleet.stop()
  try {
    for (const a of fleet.agents)
      assert.deepEqual(agentLeftovers(a), {
        containers: [],
        dirs: [],
        mounts: [],
        cgroups: [],
        procs: [],
        netns: [],
        ifaces: [],
        rules: [],
      })
  } finally {
    removeFleet(fleet)
  }
})

describe('fleet', () => {
  it('every host joined; creates through either replica spread over all three', async () => {
    assert.deepEqual(
      (await hosts(1)).map((h) => [h.id, h.state]),
      [
        ['h0', 'ready'],
        ['h1', 'ready'],
        ['h2', 'ready'],
      ],
    )
    const boxes = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => Sandbox.create({ ...conn(i % 2), ttlSeconds: 120 })))
    try {
      const placed = (await hosts(0)).map((h) => h.placed.sandboxes)
      assert.equal(
        placed.reduce((a, b) => a + b, 0),
        6,
      )
      for (const n of placed) assert.ok(n >= 1, `every host got a sandbox: ${placed}`)
      for (const [i, b] of boxes.entries()) {
        const r = await b.exec(`echo ${i}`)
        assert.equal(r.stdout, `${i}\n`)
      }
    } finally {
      await Promise.all(boxes.map((b) => b.kill()))
    }
  })

  it('a sandbox made through A is served through B: exec, streams, files, terminal, background process, exposed port', async () => {
    const made = await Sandbox.create({ ...conn(0), network: { ports: [8080] } })
    try {
      const sbx = await Sandbox.connect(made.id, conn(1))
      assert.equal((await sbx.exec('echo via B')).stdout, 'via B\n')
      let streamed = ''
      await sbx.exec('for i in 1 2 3; do echo line$i; sleep 0.1; done', {
        onStdout: (s: string) => {
          streamed += s
        },
      })
      assert.equal(streamed, 'line1\nline2\nline3\n')
      const blob = Buffer.alloc(2 * 1024 * 1024, 7)
      await sbx.files.write('/tmp/blob.bin', blob)
      const back = await made.files.read('/tmp/blob.bin', { format: 'bytes' })
      assert.equal(Buffer.compare(Buffer.from(back), blob), 0)
      let screen = ''
      const term: PtyHandle = await sbx.pty.create({
        cols: 80,
        rows: 24,
        onData: (d: Uint8Array) => {
          screen += Buffer.from(d).toString()
        },
      })
      term.sendInput('echo "tty-$((6*7))"\n')
      for (let i = 0; i < 100 && !screen.includes('tty-42'); i++) await new Promise((r) => setTimeout(r, 100))
      assert.match(screen, /tty-42/)
      term.sendInput('exit 3\n')
      assert.deepEqual(await term.wait(), { exitCode: 3, signal: null })
      await made.exec('cd /tmp && echo served-from-the-sandbox > index.html && python3 -m http.server 8080', {
        background: true,
      })
      let page = { status: 0, body: '' }
      for (let i = 0; i < 100 && page.status !== 200; i++) {
        page = await viaPort(1, made.id, 8080, '/index.html')
        if (page.status !== 200) await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(page.status, 200, page.body)
      assert.equal(page.body, 'served-from-the-sandbox\n')
    } finally {
      await made.kill()
    }
  })

  it('an events stream on B sees what happens through A', async () => {
    const seen: SandboxEvent[] = []
    const ac = new AbortController()
    const client = new ForkboxClient(conn(1))
    const reading = (async () => {
      try {
        for await (const e of client.events({ signal: ac.signal })) seen.push(e)
      } catch {}
    })()
    await new Promise((r) => setTimeout(r, 300))
    const sbx = await Sandbox.create(conn(0))
    await sbx.kill()
    for (let i = 0; i < 100 && !seen.some((e) => e.sandboxId === sbx.id && e.type === 'killed'); i++)
      await new Promise((r) => setTimeout(r, 100))
    ac.abort()
    await reading
    const mine = seen.filter((e) => e.sandboxId === sbx.id).map((e) => e.type)
    assert.deepEqual(mine.slice(0, 2), ['created', 'started'])
    assert.ok(mine.includes('killed'), mine.join(','))
  })

  it('a TTL expires exactly once across the replicas', async () => {
    const sbx = await Sandbox.create({ ...conn(1), ttlSeconds: 2 })
    const viaA = await Sandbox.connect(sbx.id, conn(0))
    for (let i = 0; i < 100 && (await viaA.getInfo()).state === 'running'; i++)
      await new Promise((r) => setTimeout(r, 200))
    // a few more reaper passes on both replicas
    await new Promise((r) => setTimeout(r, 3000))
    const res = await fetch(`${conn(0).url}/v1/sandboxes/${sbx.id}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    })
    const { events } = (await res.json()) as { events: { type: string }[] }
    const types = events.map((e) => e.type)
    assert.equal(types.filter((t) => t === 'expired').length, 1, types.join(','))
    assert.equal((await viaA.getInfo()).state, 'killed')
  })

  it('fork and hibernate/wake through the other replica', async () => {
    const src = await Sandbox.create(conn(0))
    try {
      await src.files.write('/tmp/state.txt', 'before')
      const viaB = await Sandbox.connect(src.id, conn(1))
      const [child] = await viaB.fork({ count: 1 })
      assert.ok(child)
      await child.files.write('/tmp/state.txt', 'child')
      assert.equal(await src.files.read('/tmp/state.txt'), 'before')
      assert.equal(await child.files.read('/tmp/state.txt'), 'child')
      await child.kill()
      await viaB.hibernate()
      assert.equal((await src.getInfo()).state, 'hibernated')
      assert.equal((await src.exec('cat /tmp/state.txt')).stdout, 'before')
    } finally {
      await src.kill()
    }
  })

  it('kill -9 of an agent: its sandbox is lost, creates go elsewhere; restarted, the sandbox is back as it was, and one killed meanwhile is stopped', async () => {
    const admin = (path: string) =>
      fetch(`${conn(0).url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${fleet.apiKey}` } })
    await admin('/v1/hosts/h0/cordon')
    await admin('/v1/hosts/h1/cordon')
    const sbx = await Sandbox.create({ ...conn(0), ttlSeconds: 300 })
    const killedMeanwhile = await Sandbox.create({ ...conn(0), ttlSeconds: 300 })
    await admin('/v1/hosts/h0/uncordon')
    await admin('/v1/hosts/h1/uncordon')
    const others: Sandbox[] = []
    try {
      await sbx.files.write('/tmp/kept.txt', 'kept')
      await sbx.exec('sleep 1000', { background: true })
      const h2 = fleet.agents[2]
      assert.ok(h2)
      assert.equal((await hosts()).find((h) => h.id === 'h2')?.placed.sandboxes, 2)
      await h2.kill9()
      let state = ''
      for (let i = 0; i < 100 && state !== 'lost'; i++) {
        state = (await sbx.getInfo()).state
        if (state !== 'lost') await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(state, 'lost')
      await assert.rejects(sbx.exec('true', { requestTimeoutMs: 10_000 } as never), { code: 'HOST_UNREACHABLE' })
      // its host cannot be told now: the kill answers, the stop waits for the host
      await killedMeanwhile.kill()
      assert.equal((await killedMeanwhile.getInfo()).state, 'killed')
      for (let i = 0; i < 2; i++) others.push(await Sandbox.create(conn(i)))
      assert.equal((await hosts()).find((h) => h.id === 'h2')?.placed.sandboxes, 2)
      assert.equal((await hosts()).find((h) => h.id === 'h2')?.state, 'unreachable')
      await h2.start(fleet.replicas[1]?.port ?? 0)
      for (let i = 0; i < 100 && state !== 'running'; i++) {
        state = (await sbx.getInfo()).state
        if (state !== 'running') await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(state, 'running')
      assert.equal(await sbx.files.read('/tmp/kept.txt'), 'kept')
      assert.match((await sbx.exec('ps -eo args')).stdout, /sleep 1000/)
      assert.ok(runningOn(h2).includes(sbx.id))
      let placed = 2
      for (let i = 0; i < 150 && placed !== 1; i++) {
        placed = (await hosts()).find((h) => h.id === 'h2')?.placed.sandboxes ?? -1
        if (placed !== 1) await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(placed, 1)
      // its teardown (runsc delete, the bundle) finishes after the stop answers
      for (let i = 0; i < 50 && runningOn(h2).includes(killedMeanwhile.id); i++)
        await new Promise((r) => setTimeout(r, 200))
      assert.ok(!runningOn(h2).includes(killedMeanwhile.id), `${killedMeanwhile.id} still runs on h2`)
    } finally {
      await Promise.all([sbx, killedMeanwhile, ...others].map((b) => b.kill()))
    }
  })

  it('Postgres stopped: clear 503s; started again: service as before, sandboxes kept running meanwhile', async () => {
    const sbx = await Sandbox.create(conn(0))
    try {
      await sbx.files.write('/tmp/pg.txt', 'before')
      await fleet.pg.halt()
      try {
        for (const r of [0, 1]) {
          const res = await fetch(`${conn(r).url}/v1/sandboxes/${sbx.id}/exec`, {
            method: 'POST',
            headers: { authorization: `Bearer ${fleet.apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ cmd: 'true' }),
          })
          assert.equal(res.status, 503)
          assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'STORE_UNAVAILABLE')
        }
        // longer than the hosts' grace period: their heartbeats fail all along
        await new Promise((r) => setTimeout(r, 7000))
      } finally {
        await fleet.pg.restart()
      }
      let out = ''
      for (let i = 0; i < 50 && out !== 'before'; i++) {
        out = await sbx.files.read('/tmp/pg.txt').catch(() => '')
        if (out !== 'before') await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(out, 'before')
      // a while past the grace period: the hosts heartbeat again and nothing was lost
      await new Promise((r) => setTimeout(r, 8000))
      assert.equal((await sbx.getInfo()).state, 'running')
      assert.deepEqual(
        (await hosts(1)).map((h) => h.state),
        ['ready', 'ready', 'ready'],
      )
    } finally {
      await sbx.kill()
    }
  })

  /** Places the next create on host `id` (the others cordoned meanwhile). */
  async function createOn(id: string, options: Parameters<typeof Sandbox.create>[0] = {}): Promise<Sandbox> {
    const others = fleet.agents.map((a) => a.id).filter((h) => h !== id)
    const client = new ForkboxClient(conn(0))
    for (const h of others) assert.equal((await client.hosts.cordon(h)).state, 'cordoned')
    try {
      return await Sandbox.create({ ...conn(0), ...options })
    } finally {
      for (const h of others) await client.hosts.uncordon(h)
    }
  }

  const placedOn = async () => Object.fromEntries((await hosts()).map((h) => [h.id, h.placed.sandboxes]))

  /**
   * Waits for the stops of killed sandboxes (they run on after a kill answers) to free their places;
   * one whose stop failed is stopped again by the leader 15 s after its end.
   */
  async function settled(): Promise<void> {
    let rows: { kind: string; state: string | null }[] = []
    for (let i = 0; i < 300; i++) {
      rows = (await fleet.placements()) as typeof rows
      if (rows.every((r) => r.kind !== 'sandbox' || r.state === 'running')) return
      await new Promise((r) => setTimeout(r, 100))
    }
    assert.fail(`ended sandboxes still placed: ${JSON.stringify(rows)}`)
  }

  it('fork across hosts of a live Python kernel (memory and disk); the forks diverge', async () => {
    await settled()
    const src = await createOn('h0', { template: 'code-interpreter' })
    try {
      await src.runCode('x = 41')
      await src.files.write('/tmp/disk.txt', 'disk')
      const before = await placedOn()
      const started = performance.now()
      const forks = await src.fork({ count: 2, spread: true })
      console.log(`# cross-host fork x2 of a code-interpreter sandbox: ${Math.round(performance.now() - started)} ms`)
      const after = await placedOn()
      assert.deepEqual(
        ['h1', 'h2'].map((h) => (after[h] ?? 0) - (before[h] ?? 0)),
        [1, 1],
        JSON.stringify({ before, after, placements: await fleet.placements() }),
      )
      for (const [i, f] of forks.entries()) {
        assert.equal((await f.runCode('x + 1')).text, '42')
        assert.equal(await f.files.read('/tmp/disk.txt'), 'disk')
        await f.runCode(`x = ${i * 100}`)
      }
      assert.equal((await forks[0]?.runCode('x'))?.text, '0')
      assert.equal((await forks[1]?.runCode('x'))?.text, '100')
      assert.equal((await src.runCode('x')).text, '41')
      await Promise.all(forks.map((f) => f.kill()))
    } finally {
      await src.kill()
    }
  })

  it('a hibernated sandbox wakes on another host when its own is cordoned', async () => {
    await settled()
    const sbx = await createOn('h1')
    const admin = (path: string) =>
      fetch(`${conn(1).url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${fleet.apiKey}` } })
    try {
      await sbx.files.write('/tmp/where.txt', 'remembered')
      await sbx.exec('sleep 1000', { background: true })
      await sbx.hibernate()
      await admin('/v1/hosts/h1/cordon')
      const before = await placedOn()
      assert.equal(await sbx.files.read('/tmp/where.txt'), 'remembered')
      assert.match((await sbx.exec('ps -eo args')).stdout, /sleep 1000/)
      const after = await placedOn()
      assert.equal((after.h1 ?? 0) - (before.h1 ?? 0), 0)
      assert.equal((after.h0 ?? 0) + (after.h2 ?? 0) - (before.h0 ?? 0) - (before.h2 ?? 0), 1)
    } finally {
      await admin('/v1/hosts/h1/uncordon')
      await sbx.kill()
    }
  })

  it('with the shared image store, a hibernated sandbox wakes on another host after its own was killed', async () => {
    await settled()
    const h1 = fleet.agents[1]
    assert.ok(h1)
    const sbx = await createOn('h1')
    const store = join(fleet.dir, 'image-store')
    const images = () => readdirSync(store).filter((f) => f.endsWith('.sha256'))
    try {
      await sbx.files.write('/tmp/kept.txt', 'kept')
      await sbx.exec('sleep 1000', { background: true })
      await sbx.hibernate()
      // its image reaches the store in the background
      for (let i = 0; i < 150 && images().length === 0; i++) await new Promise((r) => setTimeout(r, 200))
      assert.equal(images().length, 1)
      await h1.kill9()
      let state = ''
      for (let i = 0; i < 100 && state !== 'unreachable'; i++) {
        state = (await hosts()).find((h) => h.id === 'h1')?.state ?? ''
        if (state !== 'unreachable') await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal(state, 'unreachable')
      assert.equal(await sbx.files.read('/tmp/kept.txt'), 'kept')
      assert.match((await sbx.exec('ps -eo args')).stdout, /sleep 1000/)
      const where = (await fleet.placements()) as { id: string; host: string }[]
      assert.notEqual(where.find((p) => p.id === sbx.id)?.host, 'h1')
      // woken, its image is gone from the store too (through a host that answers)
      for (let i = 0; i < 50 && images().length > 0; i++) await new Promise((r) => setTimeout(r, 200))
      assert.deepEqual(images(), [])
    } finally {
      await sbx.kill()
      await h1.start(fleet.replicas[0]?.port ?? 0)
    }
  })

  it('a Dockerfile build with an uploaded context, through replica B: built on a host, its sandboxes run on any; one with a templates dir of its own pulls its image', async () => {
    const work = mkdtempSync(join(tmpdir(), 'fbx-fleet-ctx-'))
    const client = new ForkboxClient(conn(1))
    const own = fleet.agents[2] as (typeof fleet.agents)[number]
    const builtThere = () => readdirSync(own.templatesDir).filter((n) => /^built-[0-9a-f]{16}$/.test(n))
    try {
      writeFileSync(join(work, 'Dockerfile'), 'FROM forkbox:base\nCOPY greeting.txt /opt/greeting.txt\n')
      writeFileSync(join(work, 'greeting.txt'), 'from the context')
      // built where the shared templates dir is
      await client.hosts.cordon(own.id)
      const build = await client.templates
        .build({ name: 'fleet-ctx', context: work })
        .finally(() => client.hosts.uncordon(own.id))
      assert.equal(build.status, 'ready')
      assert.deepEqual(builtThere(), [])
      for (const host of ['h0', 'h2']) {
        const started = performance.now()
        const sbx = await createOn(host, { template: 'fleet-ctx' })
        if (host === own.id)
          console.log(
            `# create on a host without the template's image (pulled, then baked): ${Math.round(performance.now() - started)} ms`,
          )
        try {
          assert.equal(await sbx.files.read('/opt/greeting.txt'), 'from the context')
          assert.equal((await sbx.exec('id -un')).stdout, 'user\n')
        } finally {
          await sbx.kill()
        }
      }
      // the image came whole, owners and modes kept, and stays for the next create there
      const [rootfs] = builtThere()
      assert.ok(rootfs, 'the image is on h2 now')
      const copied = join(own.templatesDir, rootfs)
      const shared = join(fleet.agents[0]?.templatesDir ?? '', rootfs)
      for (const path of ['opt/greeting.txt', 'usr/bin/sudo', 'home/user', 'tmp', 'etc/shadow'].filter((p) =>
        existsSync(join(shared, p)),
      )) {
        const [a, b] = [lstatSync(join(shared, path)), lstatSync(join(copied, path))]
        assert.deepEqual([b.uid, b.gid, b.mode], [a.uid, a.gid, a.mode], path)
      }
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  })

  it('drain: a running kernel and a background process move live to another host; a client calling meanwhile sees no error', async () => {
    await settled()
    const sbx = await createOn('h2', { template: 'code-interpreter' })
    try {
      await sbx.runCode('y = "kept"')
      await sbx.exec('while true; do echo tick >> /tmp/ticks; sleep 0.2; done', { background: true })
      const viaB = await Sandbox.connect(sbx.id, conn(1))
      const errors: unknown[] = []
      let slowest = 0
      let calls = 0
      let draining = true
      const caller = (async () => {
        while (draining) {
          const t = performance.now()
          try {
            await viaB.exec('true')
            calls++
          } catch (err) {
            errors.push(err)
          }
          slowest = Math.max(slowest, performance.now() - t)
        }
      })()
      const report = await new ForkboxClient(conn(0)).hosts.drain('h2')
      draining = false
      await caller
      console.log(`# live migration: ${calls} calls during the drain, slowest ${Math.round(slowest)} ms`)
      assert.ok(report.migrated.includes(sbx.id), JSON.stringify(report))
      assert.deepEqual(report.failed, [])
      assert.deepEqual(errors, [])
      const placed = await placedOn()
      assert.equal(placed.h2, 0, JSON.stringify(await fleet.placements()))
      assert.equal((await sbx.getInfo()).state, 'running')
      assert.equal((await sbx.runCode('y')).text, 'kept')
      const n1 = (await sbx.exec('wc -l < /tmp/ticks')).stdout.trim()
      await new Promise((r) => setTimeout(r, 1000))
      const n2 = (await sbx.exec('wc -l < /tmp/ticks')).stdout.trim()
      assert.ok(Number(n2) > Number(n1), `the background process still writes: ${n1} -> ${n2}`)
    } finally {
      await fetch(`${conn(0).url}/v1/hosts/h2/uncordon`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fleet.apiKey}` },
      })
      await sbx.kill()
    }
  })

  it('kill -9 of a replica during a stream of creates: no sandbox lost, leaked or made twice', async () => {
    await settled()
    const c = await fleet.startReplicaProcess()
    const viaC = { url: c.url, apiKey: fleet.apiKey }
    const batch = `kill9-${Date.now()}`
    const creates = Array.from({ length: 6 }, (_, i) =>
      new Promise((r) => setTimeout(r, i * 150))
        .then(() => Sandbox.create({ ...viaC, ttlSeconds: 300, metadata: { batch } }))
        .then(
          (s) => s.id,
          () => null,
        ),
    )
    await new Promise((r) => setTimeout(r, 450))
    await c.kill9()
    const answered = (await Promise.all(creates)).filter((id): id is string => id !== null)
    // what the dead replica answered runs, served by the others
    for (const id of answered) assert.equal((await (await Sandbox.connect(id, conn(0))).exec('echo ok')).stdout, 'ok\n')
    // past the starting timeout: what it left half-made is errored and stopped, nothing stays starting
    let batchNow = await Sandbox.list({ ...conn(1), metadata: { batch } })
    for (let i = 0; i < 300 && batchNow.some((s) => s.state === 'starting'); i++) {
      await new Promise((r) => setTimeout(r, 100))
      batchNow = await Sandbox.list({ ...conn(1), metadata: { batch } })
    }
    const states = batchNow.map((s) => s.state)
    assert.ok(!states.includes('starting'), states.join(','))
    const running = batchNow.filter((s) => s.state === 'running').map((s) => s.id)
    for (const id of answered) assert.ok(running.includes(id), `${id} answered but is not running`)
    // one record per sandbox, and no container that is not a running sandbox's (pools aside)
    assert.equal(new Set(batchNow.map((s) => s.id)).size, batchNow.length)
    await settled()
    const everyRunning = new Set((await Sandbox.list({ ...conn(0), state: 'running' })).map((s) => s.id))
    // (ids only: `runsc list` with states asks every sandbox, and a frozen pool sandbox never answers)
    const strays = () =>
      fleet.agents.flatMap((a) =>
        execFileSync('runsc', [`--root=${a.stateDir}`, 'list', '-quiet'])
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((id) => id.replace(/-[0-9a-f]{6}$/, ''))
          .filter((n) => !n.startsWith('pool-') && !everyRunning.has(n))
          .map((n) => `${n} on ${a.id}`),
      )
    // a stopped sandbox's container goes with its teardown, shortly after
    await until('no container that is not a running sandbox', () => strays().length === 0, 15_000).catch(() =>
      assert.deepEqual(strays(), [], 'containers that are no running sandbox'),
    )
    await Promise.all(running.map(async (id) => (await Sandbox.connect(id, conn(0))).kill()))
  })
})
