// Streaming on real runsc: output arrives as it is written, a slow reader holds a 100 MB stream back
// without the server buffering it, background processes outlive their clients and take stdin.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
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
    const baseline = process.memoryUsage().rss
    let peak = baseline
    let bytes = 0
    let exit: number | undefined
    // the reader is slow: it pauses 20 ms after every MB
    let nextPause = 1 << 20
    for await (const e of sbx.execStream('head -c 100000000 /dev/zero | tr "\\0" "x"', { timeoutSeconds: 600 })) {
      if (e.type === 'stdout') {
        bytes += e.data.length
        if (bytes >= nextPause) {
          nextPause += 1 << 20
          peak = Math.max(peak, process.memoryUsage().rss)
          await new Promise((r) => setTimeout(r, 20))
        }
      } else if (e.type === 'exit') exit = e.exitCode
    }
    assert.equal(exit, 0)
    assert.equal(bytes, 100_000_000)
    // server and client share this process: growth well under the stream's size means no one buffered it
    const growthMB = (peak - baseline) / 1e6
    assert.ok(growthMB < 80, `RSS grew by ${growthMB.toFixed(0)} MB while streaming 100 MB`)
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
