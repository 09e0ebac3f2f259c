// Streaming on real runsc: output arrives as it is written, a slow reader holds a 100 MB stream back
// without the server buffering it, background processes outlive their clients and take stdin;
// lifecycle events arrive live and in order; /metrics counts what happened.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ConflictError, type FileChange, ForkboxClient, ForkboxError, NotFoundError, Sandbox } from '@forkbox/sdk'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { useTestHost } from './harness.ts'

const host = useTestHost()

describe('streaming exec', () => {
  it('a line printed every 100 ms arrives line by line, the first well before the end', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const started = performance.now()
    const arrivals: [string, number][] = []
    const r = await sbx.exec('for i in $(seq 1 30); do echo "line $i"; sleep 0.1; done', {
      onStdout: (data) => arrivals.push([data, performance.now() - started]),
    })
    const total = performance.now() - started
    assert.equal(r.exitCode, 0)
    const lines = arrivals.map(([d]) => d).join('')
    assert.equal(lines, Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`).join(''))
    assert.ok(arrivals.length >= 20, `only ${arrivals.length} chunks: output was batched`)
    const first = arrivals[0]?.[1] ?? total
    assert.ok(first < total - 2000, `first line at ${Math.round(first)} ms of ${Math.round(total)} ms`)
    assert.equal(r.stdout, lines)
  })

  it('a 100 MB stream to a slow reader completes, with the server holding only a window of it', async () => {
    await using sbx = await Sandbox.create(host().conn)
    // the writer records how many bytes it has handed to its stdout, so the test can see how far
    // ahead of the reader it got: with flow control end to end it blocks once the windows are full
    const writer = [
      'import sys',
      'chunk = b"x" * (1 << 20)',
      'for i in range(1, 96):',
      '    sys.stdout.buffer.write(chunk)',
      '    sys.stdout.buffer.flush()',
      '    open("/tmp/progress", "w").write(str(i))',
      'sys.stdout.buffer.write(b"x" * (100_000_000 - 95 * (1 << 20)))',
    ].join('\n')
    await sbx.files.write('/tmp/writer.py', writer)
    let bytes = 0
    let exit: number | undefined
    let aheadMB: number | undefined
    // the reader is slow: it pauses 20 ms after every MB, and once, after 5 MB, stops for 3 s
    let nextPause = 1 << 20
    for await (const e of sbx.execStream('python3 /tmp/writer.py', { timeoutSeconds: 600 })) {
      if (e.type === 'stdout') {
        bytes += e.data.length
        if (bytes >= nextPause) {
          nextPause += 1 << 20
          if (aheadMB === undefined && bytes >= 5 << 20) {
            await new Promise((r) => setTimeout(r, 3000))
            const written = Number((await sbx.exec('cat /tmp/progress')).stdout)
            aheadMB = written - bytes / (1 << 20)
          }
          await new Promise((r) => setTimeout(r, 20))
        }
      } else if (e.type === 'exit') exit = e.exitCode
    }
    assert.equal(exit, 0)
    assert.equal(bytes, 100_000_000)
    // with nothing buffered beyond the windows (guest credit, socket buffers), the writer is only a
    // few MB ahead of a stalled reader; an unbounded buffer would let it finish all 95 MB
    assert.ok(
      aheadMB !== undefined && aheadMB < 32,
      `the writer got ${aheadMB?.toFixed(1)} MB ahead of a stalled reader`,
    )
  })

  it('breaking out of a stream kills the command', async () => {
    await using sbx = await Sandbox.create(host().conn)
    for await (const e of sbx.execStream('echo started; sleep 30; echo never')) {
      if (e.type === 'stdout') break
    }
    // the command is gone shortly after
    let running = true
    for (let i = 0; i < 40 && running; i++) {
      await new Promise((r) => setTimeout(r, 100))
      running = /sleep 30/.test((await sbx.exec(['ps', '-eo', 'args'])).stdout)
    }
    assert.equal(running, false)
  })
})

describe('background processes', () => {
  it('survive the client disconnecting, and a reconnect gets all the output and the exit', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const proc = await sbx.exec('for i in $(seq 1 20); do echo "tick $i"; sleep 0.1; done; exit 3', {
      background: true,
    })
    assert.ok(proc.pid > 0)
    // watch a little, then go away
    const seen: string[] = []
    for await (const e of proc.output()) {
      if (e.type === 'stdout') seen.push(e.data)
      if (seen.join('').includes('tick 3')) break
    }
    const listed = await sbx.processes.list()
    assert.ok(
      listed.some((p) => p.pid === proc.pid && p.running),
      JSON.stringify(listed),
    )
    // another client, from the start of the log
    const again = sbx.processes.connect(proc.pid)
    let out = ''
    const exit = await again.wait({ onStdout: (d) => (out += d) })
    assert.equal(exit.exitCode, 3)
    assert.equal(out, Array.from({ length: 20 }, (_, i) => `tick ${i + 1}\n`).join(''))
    const after = (await sbx.processes.list()).find((p) => p.pid === proc.pid)
    assert.deepEqual([after?.running, after?.exitCode], [false, 3])
    // wait on an ended process answers at once
    assert.equal((await again.wait()).exitCode, 3)
  })

  it('take stdin: python reverses a line sent to it', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const proc = await sbx.exec(['python3', '-c', 'print(input()[::-1])'], { background: true })
    await proc.sendStdin('forkbox\n')
    let out = ''
    const exit = await proc.wait({ onStdout: (d) => (out += d) })
    assert.equal(exit.exitCode, 0)
    assert.equal(out, 'xobkrof\n')
  })

  it('can be killed; an unknown pid is a 404', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const proc = await sbx.exec('sleep 60', { background: true })
    await proc.kill('SIGTERM')
    const exit = await proc.wait()
    assert.equal(exit.signal, 'SIGTERM')
    await assert.rejects(sbx.processes.connect(999999).wait(), /PROCESS_NOT_FOUND|no background process/)
  })
})

describe('directory watch', () => {
  /** Collects changes until `until` says enough (or 10 s pass). */
  function collector() {
    const seen: FileChange[] = []
    const waiters: (() => void)[] = []
    return {
      seen,
      on: (c: FileChange) => {
        seen.push(c)
        for (const w of waiters.splice(0)) w()
      },
      async until(pred: (seen: FileChange[]) => boolean, what: string): Promise<void> {
        const deadline = Date.now() + 10_000
        while (!pred(seen)) {
          if (Date.now() > deadline) assert.fail(`${what}: saw ${JSON.stringify(seen)}`)
          await new Promise<void>((r) => {
            waiters.push(r)
            setTimeout(r, 200)
          })
        }
      },
    }
  }
  const has = (seen: FileChange[], type: string, name: string) => seen.some((c) => c.type === type && c.name === name)

  it('reports create, write, chmod, rename and remove (by the API and by a command), recursively, then stops', async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.files.makeDir('/home/user/w/old')
    const c = collector()
    const handle = await sbx.files.watch('w', c.on, { recursive: true })
    assert.equal(handle.path, '/home/user/w')
    await sbx.files.write('/home/user/w/a.txt', 'one')
    await sbx.exec(
      'chmod 600 /home/user/w/a.txt && mv /home/user/w/a.txt /home/user/w/b.txt && echo more >> /home/user/w/b.txt',
    )
    await sbx.exec(
      'mkdir -p /home/user/w/new/deeper && sleep 0.3 && touch /home/user/w/new/deeper/f && rm /home/user/w/b.txt',
    )
    await sbx.exec('echo x > /home/user/w/old/g')
    await c.until(
      (s) =>
        has(s, 'create', 'a.txt') &&
        has(s, 'write', 'a.txt') &&
        has(s, 'chmod', 'a.txt') &&
        has(s, 'rename', 'a.txt') &&
        has(s, 'create', 'b.txt') &&
        has(s, 'write', 'b.txt') &&
        has(s, 'create', 'new') &&
        has(s, 'create', 'new/deeper/f') &&
        has(s, 'remove', 'b.txt') &&
        has(s, 'create', 'old/g'),
      'every kind of change',
    )
    assert.ok(c.seen.every((e) => e.path === (e.name ? `/home/user/w/${e.name}` : '/home/user/w')))
    await handle.stop()
    assert.deepEqual(await handle.done, { reason: 'stopped' })
    const count = c.seen.length
    await sbx.files.write('/home/user/w/after.txt', 'x')
    await new Promise((r) => setTimeout(r, 500))
    assert.equal(c.seen.length, count, 'a change after stop() was reported')
  })

  it('a non-recursive watch sees only its own entries; a removed directory ends it; a missing one is refused', async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.files.makeDir('/work/d/sub')
    const c = collector()
    const handle = await sbx.files.watch('/work/d', c.on)
    await sbx.files.write('/work/d/sub/hidden.txt', 'x')
    await sbx.files.write('/work/d/top.txt', 'x')
    await c.until((s) => has(s, 'create', 'top.txt'), 'the top-level file')
    assert.ok(!c.seen.some((e) => e.name.startsWith('sub/')), JSON.stringify(c.seen))
    await sbx.files.remove('/work/d')
    assert.deepEqual(await handle.done, { reason: 'gone' })
    await assert.rejects(sbx.files.watch('/work/nope', c.on), (e: unknown) => e instanceof NotFoundError)
    await sbx.files.write('/work/file', 'x')
    await assert.rejects(sbx.files.watch('/work/file', c.on), (e: unknown) => e instanceof ConflictError)
    // root's directories are not the default user's to watch
    await sbx.exec('mkdir -m 700 /work/private', { user: 'root' })
    await assert.rejects(
      sbx.files.watch('/work/private', c.on),
      (e: unknown) => e instanceof ForkboxError && e.code === 'PERMISSION_DENIED',
    )
  })

  it('a watch ends with an error when its sandbox is killed', async () => {
    const sbx = await Sandbox.create(host().conn)
    const handle = await sbx.files.watch('/work', () => {})
    await sbx.kill()
    await assert.rejects(handle.done, (e: unknown) => e instanceof ForkboxError)
  })
})

describe('events and metrics', () => {
  it('events of create → exec → fork → kill arrive live, in order', async () => {
    const client = new ForkboxClient(host().conn)
    const ac = new AbortController()
    const since = (await (
      await fetch(`${host().conn.url}/v1/events`, { headers: { authorization: `Bearer ${host().conn.apiKey}` } })
    ).json()) as { events: { id: number }[] }
    const seen: { type: string; sandboxId: string }[] = []
    const listening = (async () => {
      for await (const e of client.events({ since: since.events.at(-1)?.id ?? 0, signal: ac.signal })) {
        seen.push(e)
        if (e.type === 'killed' && seen.filter((x) => x.type === 'killed').length === 2) return
      }
    })().catch((err) => {
      if (!ac.signal.aborted) throw err
    })
    const sbx = await Sandbox.create(host().conn)
    await sbx.exec('true')
    const [fork] = await sbx.fork()
    await fork?.kill()
    await sbx.kill()
    await Promise.race([listening, new Promise((r) => setTimeout(r, 15_000))])
    ac.abort()
    const mine = seen.filter((e) => e.sandboxId === sbx.id).map((e) => e.type)
    assert.deepEqual(
      mine.filter((t) =>
        ['created', 'started', 'exec-started', 'exec-ended', 'snapshotted', 'forked', 'killed'].includes(t),
      ),
      ['created', 'started', 'exec-started', 'exec-ended', 'forked', 'killed'],
    )
    const forkEvents = seen.filter((e) => e.sandboxId === fork?.id).map((e) => e.type)
    assert.deepEqual(forkEvents, ['created', 'started', 'forked-from', 'killed'])
  })

  it('/metrics parses and counts what the test did; a sandbox reports its own usage', async () => {
    type Families = { name: string; metrics: { value?: string; labels?: Record<string, string> }[] }[]
    const scrape = async () => {
      const res = await fetch(`${host().conn.url}/metrics`, {
        headers: { authorization: `Bearer ${host().conn.apiKey}` },
      })
      assert.equal(res.status, 200)
      const text = await res.text()
      return { text, families: parsePrometheusTextFormat(text) as Families }
    }
    // the parser keeps no labels on histogram series: read their _count lines from the text
    const count = (s: { text: string }, name: string, labels: Record<string, string>) => {
      for (const line of s.text.split('\n')) {
        if (!line.startsWith(`${name}_count{`)) continue
        if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
          return Number(line.split(' ').at(-1))
      }
      return 0
    }
    const before = await scrape()
    const sbx = await Sandbox.create(host().conn)
    for (let i = 0; i < 3; i++) await sbx.exec(['true'])
    await assert.rejects(sbx.files.read('/nope'))
    const after = await scrape()
    assert.equal(
      count(after, 'forkbox_sandbox_create_seconds', { template: 'base', from: 'template' }) -
        count(before, 'forkbox_sandbox_create_seconds', { template: 'base', from: 'template' }),
      1,
    )
    assert.equal(
      count(after, 'forkbox_exec_seconds', { kind: 'exec' }) - count(before, 'forkbox_exec_seconds', { kind: 'exec' }),
      3,
    )
    const notFound = (s: { families: Families }) =>
      Number(
        s.families
          .find((x) => x.name === 'forkbox_api_errors_total')
          ?.metrics.find((m) => m.labels?.code === 'FILE_NOT_FOUND')?.value ?? 0,
      )
    assert.equal(notFound(after) - notFound(before), 1)
    const mem = after.families
      .find((f) => f.name === 'forkbox_sandbox_memory_bytes')
      ?.metrics.find((m) => m.labels?.sandbox === sbx.id)
    assert.ok(Number(mem?.value) > 10 * 1024 * 1024, `memory of ${sbx.id}: ${mem?.value}`)
    // where it lives on the host, by its id (a claimed pool sandbox keeps the pool's names)
    const info = after.families
      .find((f) => f.name === 'forkbox_sandbox_info')
      ?.metrics.find((m) => m.labels?.sandbox === sbx.id)?.labels
    const cgroup = info?.cgroup ?? ''
    assert.ok(info?.container && cgroup.endsWith(`/${info.container}`), JSON.stringify(info))
    const cgroupDir = existsSync('/sys/fs/cgroup/cgroup.controllers')
      ? join('/sys/fs/cgroup', cgroup)
      : join('/sys/fs/cgroup/memory', cgroup)
    assert.ok(existsSync(join(cgroupDir, 'cgroup.procs')), cgroupDir)
    // its own view: samples come every 5 s; disk use counts what we write
    await sbx.files.write('/work/blob', new Uint8Array(3 * 1024 * 1024))
    await new Promise((r) => setTimeout(r, 5500))
    const m = await sbx.getMetrics()
    assert.ok(m.samples.length >= 1 && (m.samples[0]?.memoryBytes ?? 0) > 0)
    assert.ok((m.diskBytes ?? 0) >= 3 * 1024 * 1024, `disk ${m.diskBytes}`)
    assert.equal(m.diskLimitBytes, sbx.info.resources.diskMB * 1024 * 1024)
    await sbx.kill()
  })
})
