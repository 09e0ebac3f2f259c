// The code interpreter on real runsc: a persistent kernel per context, rich results (text, html,
// PNG), streamed output, errors, timeouts, kernel death, contexts, fresh randomness per sandbox,
// and a fork that carries the kernel's state.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { type CodeContext, NotFoundError, Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()
let sbx: Sandbox

/** Width and height from a PNG's IHDR chunk, after checking its signature. */
function pngSize(b64: string): { width: number; height: number } {
  const png = Buffer.from(b64, 'base64')
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR')
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) }
}

describe('code interpreter', () => {
  before(async () => {
    sbx = await Sandbox.create({ ...host().conn, template: 'code-interpreter', ttlSeconds: 900 })
  })
  after(async () => {
    await sbx?.kill()
  })

  it('keeps state across cells and returns the last expression as the main result', async () => {
    const first = await sbx.runCode('x = 1')
    assert.equal(first.error, null)
    assert.deepEqual(first.results, [])
    const second = await sbx.runCode('x + 1')
    assert.equal(second.text, '2')
    assert.equal(second.results[0]?.isMainResult, true)
    assert.equal(second.executionCount, (first.executionCount ?? 0) + 1)
    // the template's preload: numpy, pandas and matplotlib are there without an import
    assert.equal(
      (await sbx.runCode('type(pd).__name__, np.__name__, plt.__name__')).text,
      "('module', 'numpy', 'matplotlib.pyplot')",
    )
  })

  it('returns a DataFrame as text, html and its data as json', async () => {
    const e = await sbx.runCode('df = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3.5, 19.0]})\ndf')
    const r = e.results[0]
    assert.ok(r?.html?.includes('<table'), 'html table')
    assert.ok(r?.html?.includes('Lima'))
    assert.match(r?.text ?? '', /city\s+temp/)
    assert.deepEqual(r?.json, {
      columns: ['city', 'temp'],
      index: [0, 1],
      data: [
        ['Oslo', 3.5],
        ['Lima', 19.0],
      ],
    })
  })

  it("returns every figure as a PNG of the figure's size", async () => {
    const e = await sbx.runCode(
      'fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\nax.bar(["a", "b", "c"], [3, 1, 2])\nplt.show()\nplt.figure(figsize=(2, 2), dpi=50)\nplt.plot([1, 2])',
    )
    assert.equal(e.error, null)
    const pngs = e.results.filter((r) => r.png)
    assert.equal(pngs.length, 2)
    assert.deepEqual(pngSize(pngs[0]?.png as string), { width: 400, height: 300 })
    assert.deepEqual(pngSize(pngs[1]?.png as string), { width: 100, height: 100 })
    // shown figures are closed: the next cell starts with none
    assert.equal((await sbx.runCode('len(plt.get_fignums())')).text, '0')
  })

  it('gives each figure its chart as data: line, scatter, bar, pie, box and whisker, and a superchart of subplots', async () => {
    const cell = (code: string) => sbx.runCode(code)
    const chartOf = async (code: string) => {
      const e = await cell(code)
      assert.equal(e.error, null, e.error?.traceback)
      const charts = e.results.filter((r) => r.chart).map((r) => r.chart as Record<string, unknown>)
      assert.equal(charts.length, 1, JSON.stringify(e.results.map((r) => Object.keys(r))))
      return charts[0] as Record<string, unknown> & { elements: Record<string, unknown>[] }
    }
    const line = await chartOf(
      'plt.plot([1, 2, 3], [2, 4, 8], label="growth")\nplt.title("Growth")\nplt.xlabel("Time (s)")\nplt.ylabel("Size [MB]")\nplt.show()',
    )
    assert.equal(line.type, 'line')
    assert.equal(line.title, 'Growth')
    assert.equal(line.x_label, 'Time (s)')
    assert.equal(line.x_unit, 's')
    assert.equal(line.y_unit, 'MB')
    assert.equal(line.x_scale, 'linear')
    assert.deepEqual(line.elements, [
      {
        label: 'growth',
        points: [
          [1, 2],
          [2, 4],
          [3, 8],
        ],
      },
    ])
    assert.ok(Array.isArray(line.x_ticks) && (line.x_tick_labels as string[]).length > 0)
    const scatter = await chartOf('plt.scatter([1, 2], [3, 4], label="pts")\nplt.yscale("log")\nplt.show()')
    assert.equal(scatter.type, 'scatter')
    assert.equal(scatter.y_scale, 'log')
    assert.deepEqual(scatter.elements, [
      {
        label: 'pts',
        points: [
          [1, 3],
          [2, 4],
        ],
      },
    ])
    const bar = await chartOf('fig, ax = plt.subplots()\nax.bar(["a", "b"], [3, 5], label="2024")\nplt.show()')
    assert.equal(bar.type, 'bar')
    assert.deepEqual(bar.elements, [
      { label: 'a', group: '2024', value: 3 },
      { label: 'b', group: '2024', value: 5 },
    ])
    const pie = await chartOf('plt.pie([1, 3], labels=["x", "y"])\nplt.show()')
    assert.equal(pie.type, 'pie')
    assert.deepEqual(
      pie.elements.map((e) => [e.label, Math.round(e.angle as number)]),
      [
        ['x', 90],
        ['y', 270],
      ],
    )
    const box = await chartOf('plt.boxplot([[1, 2, 3, 4, 5, 40], [2, 3, 4]], labels=["A", "B"])\nplt.show()')
    assert.equal(box.type, 'box_and_whisker')
    assert.deepEqual(box.elements[0], {
      label: 'A',
      min: 1,
      first_quartile: 2.25,
      median: 3.5,
      third_quartile: 4.75,
      max: 5,
      outliers: [40],
    })
    const grid = await chartOf(
      'fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle("Two")\na.plot([1, 2])\nb.bar(["k"], [1])\nplt.show()',
    )
    assert.equal(grid.type, 'superchart')
    assert.equal(grid.title, 'Two')
    assert.deepEqual(
      grid.elements.map((e) => e.type),
      ['line', 'bar'],
    )
  })

  it('streams stdout and stderr in order, subprocess output included', async () => {
    const seen: string[] = []
    const e = await sbx.runCode(
      'import sys, time\nprint("one")\nprint("two", file=sys.stderr)\nsys.stderr.flush()\ntime.sleep(0.3)\nprint("three")\n!echo four',
      { onStdout: (t) => seen.push(`out:${t}`), onStderr: (t) => seen.push(`err:${t}`) },
    )
    assert.deepEqual(seen, ['out:one\n', 'err:two\n', 'out:three\n', 'out:four\n'])
    assert.deepEqual(e.logs, { stdout: ['one\n', 'three\n', 'four\n'], stderr: ['two\n'] })
  })

  it('delivers output while the cell runs, not at its end', async () => {
    const started = performance.now()
    let firstAt = 0
    await sbx.runCode('import time\nfor i in range(10):\n    print(i)\n    time.sleep(0.1)', {
      onStdout: () => {
        firstAt ||= performance.now() - started
      },
    })
    const total = performance.now() - started
    assert.ok(firstAt > 0 && firstAt < total - 500, `first line at ${firstAt} ms of ${total} ms`)
  })

  it('reports an exception with its name, value and traceback', async () => {
    const e = await sbx.runCode('def f():\n    return 1 / 0\nf()')
    assert.equal(e.error?.name, 'ZeroDivisionError')
    assert.equal(e.error?.value, 'division by zero')
    assert.match(e.error?.traceback ?? '', /return 1 \/ 0/)
    const syntax = await sbx.runCode('x = (')
    assert.equal(syntax.error?.name, 'SyntaxError')
  })

  it('interrupts a cell at its timeout and keeps the kernel state', async () => {
    await sbx.runCode('kept = 41')
    const e = await sbx.runCode('import time\nwhile True:\n    time.sleep(0.05)', { timeoutSeconds: 1 })
    assert.equal(e.timedOut, true)
    assert.equal(e.error?.name, 'TimeoutError')
    assert.match(e.error?.traceback ?? '', /KeyboardInterrupt/)
    assert.equal((await sbx.runCode('kept + 1')).text, '42')
  })

  it('a cell that kills its kernel gets a clear error, and the next cell a fresh kernel', async () => {
    await sbx.runCode('doomed = 1')
    const e = await sbx.runCode('import os\nos._exit(3)')
    assert.equal(e.error?.name, 'KernelDiedError')
    assert.match(e.error?.value ?? '', /exited with code 3/)
    const next = await sbx.runCode('doomed')
    assert.equal(next.error?.name, 'NameError')
    assert.equal((await sbx.runCode('import pandas; 6 * 7')).text, '42')
  })

  it('contexts have their own variables and cwd; restart clears one, remove ends it', async () => {
    const a = await sbx.createCodeContext({ cwd: '/work/a' })
    const b = await sbx.contexts.create({ cwd: '/tmp' })
    assert.notEqual(a.id, b.id)
    await sbx.runCode('v = "a"', { context: a })
    await sbx.runCode('v = "b"', { context: b.id })
    assert.equal((await sbx.runCode('v', { context: a })).text, 'a')
    assert.equal((await sbx.runCode('v', { context: b })).text, 'b')
    assert.equal((await sbx.runCode('import os; os.getcwd()', { context: a })).text, '/work/a')
    assert.equal((await sbx.runCode('"v" in globals()')).text, 'False')
    const ids = (await sbx.contexts.list()).map((c) => c.id)
    assert.ok(ids.includes(a.id) && ids.includes(b.id) && ids.includes('python'))
    await sbx.contexts.restart(a)
    assert.equal((await sbx.runCode('v', { context: a })).error?.name, 'NameError')
    await sbx.contexts.remove(b)
    await assert.rejects(sbx.runCode('v', { context: b }), NotFoundError)
    await assert.rejects(sbx.contexts.remove('python'), /can be restarted but not removed/)
  })

  it('the first new context starts cold and brings a zygote; later ones start warm, forked from it: the preload in, no other context state, their own cwd, env and randomness; they interrupt, die and restart like any kernel', async () => {
    // a sandbox of its own: the other tests' contexts brought this one's zygote already
    await using sbx = await Sandbox.create({ ...host().conn, template: 'code-interpreter' })
    // a forked kernel's parent is the zygote (a Python kernel); one started cold is the spawner's, outside its namespace
    const parent =
      "import os; open(f'/proc/{os.getppid()}/cmdline').read().split(chr(0))[1] if os.getppid() else 'cold'"
    const pid = async (ctx: CodeContext) => Number((await sbx.runCode('os.getpid()', { context: ctx })).text)
    const gone = (p: number) => sbx.exec(`while kill -0 ${p} 2>/dev/null; do sleep 0.05; done`, { user: 'root' })
    await sbx.runCode('only_in_default = 1')
    // the template's zygote is lazy: the default kernel brought none, the first context a user makes does
    const first = await sbx.createCodeContext()
    assert.equal((await sbx.runCode(parent, { context: first })).text, 'cold')
    const [a, b] = await Promise.all([
      sbx.createCodeContext({ cwd: '/tmp/za', envs: { ZYGOTE_TEST: 'a' } }),
      sbx.createCodeContext({ cwd: '/tmp/zb' }),
    ])
    const probe =
      'import os, sys, json, random; print(json.dumps([os.getcwd(), os.environ.get("ZYGOTE_TEST"), "pandas" in sys.modules, "only_in_default" in globals(), random.random(), float(np.random.rand())]))'
    const [ra, rb] = await Promise.all([sbx.runCode(probe, { context: a }), sbx.runCode(probe, { context: b })])
    const pa = JSON.parse(ra.logs.stdout.join(''))
    const pb = JSON.parse(rb.logs.stdout.join(''))
    assert.deepEqual(pa.slice(0, 4), ['/tmp/za', 'a', true, false])
    assert.deepEqual(pb.slice(0, 4), ['/tmp/zb', null, true, false])
    assert.notEqual(pa[4], pb[4])
    assert.notEqual(pa[5], pb[5])
    assert.match((await sbx.runCode(parent, { context: a })).text ?? '', /forkbox_kernel\.py/)
    // interrupted at its timeout, it keeps its state; killed, the next cell gets a fresh one (forked again)
    await sbx.runCode('kept = 41', { context: a })
    const slow = await sbx.runCode('import time\nwhile True:\n    time.sleep(0.05)', { context: a, timeoutSeconds: 1 })
    assert.equal(slow.error?.name, 'TimeoutError')
    assert.equal((await sbx.runCode('kept + 1', { context: a })).text, '42')
    const died = await sbx.runCode('import os\nos._exit(3)', { context: a })
    assert.equal(died.error?.name, 'KernelDiedError')
    assert.match(died.error?.value ?? '', /exited with code 3/)
    assert.equal((await sbx.runCode('kept', { context: a })).error?.name, 'NameError')
    const zygote = Number((await sbx.runCode('import os; os.getppid()', { context: a })).text)
    // env that Python reads at start cannot be forked in: that context starts cold, with it
    const cold = await sbx.createCodeContext({ envs: { PYTHONPATH: '/tmp/zygote-path' } })
    assert.equal((await sbx.runCode(parent, { context: cold })).text, 'cold')
    assert.equal((await sbx.runCode('import sys; "/tmp/zygote-path" in sys.path', { context: cold })).text, 'True')
    // root ends the zygote: what it forked ends with it, the next cell starts cold, later contexts fork again
    await sbx.runCode('mine = 1', { context: b })
    const bPid = await pid(b)
    assert.equal((await sbx.exec(['kill', '-9', String(zygote)], { user: 'root' })).exitCode, 0)
    await gone(bPid)
    assert.equal((await sbx.runCode('mine', { context: b })).error?.name, 'NameError')
    assert.equal((await sbx.runCode(parent, { context: b })).text, 'cold')
    const c = await sbx.createCodeContext()
    assert.match((await sbx.runCode(parent, { context: c })).text ?? '', /forkbox_kernel\.py/)
    assert.notEqual(Number((await sbx.runCode('import os; os.getppid()', { context: c })).text), zygote)
    // removed, a forked kernel is gone
    const cPid = await pid(c)
    await Promise.all([first, a, b, c, cold].map((ctx) => sbx.contexts.remove(ctx)))
    await gone(cPid)
  })

  it('runs bash cells in a persistent shell', async () => {
    await sbx.runCode('cd /tmp && export GREETING=hi', { language: 'bash' })
    const e = await sbx.runCode('echo "$GREETING from $(pwd)"', { language: 'bash' })
    assert.deepEqual(e.logs.stdout, ['hi from /tmp\n'])
    const failed = await sbx.runCode('exit_with() { return 3; }; exit_with', { language: 'bash' })
    assert.equal(failed.error?.value, 'exit code 3')
  })

  it("runs javascript cells on the template's Node.js, with state, results, await and interrupts", async () => {
    const js = { language: 'javascript' as const }
    await sbx.runCode('let total = 40; function add(a, b) { return a + b }', js)
    const e = await sbx.runCode('console.log("adding"); add(total, 2)', js)
    assert.equal(e.text, '42')
    assert.deepEqual(e.logs.stdout, ['adding\n'])
    assert.deepEqual((await sbx.runCode('({ a: [1, 2] })', js)).results[0]?.json, { a: [1, 2] })
    const awaited = await sbx.runCode('await new Promise((r) => setTimeout(r, 50)); return total * 2', js)
    assert.equal(awaited.text, '80')
    const thrown = await sbx.runCode('null.x', js)
    assert.equal(thrown.error?.name, 'TypeError')
    assert.match(thrown.error?.traceback ?? '', /cell-\d+\.js/)
    const spin = await sbx.runCode('while (true) {}', { ...js, timeoutSeconds: 1 })
    assert.equal(spin.error?.name, 'TimeoutError')
    assert.equal((await sbx.runCode('total', js)).text, '40')
  })

  it('per-cell envs apply to that cell only', async () => {
    const e = await sbx.runCode('import os; os.environ.get("ONLY_HERE")', { envs: { ONLY_HERE: 'yes' } })
    assert.equal(e.text, 'yes')
    assert.equal((await sbx.runCode('os.environ.get("ONLY_HERE")')).text, undefined)
  })

  it('two sandboxes from the template draw different random numbers', async () => {
    const code = 'import json, random; print(json.dumps([random.random(), float(np.random.rand())]))'
    const [one, two] = await Promise.all([
      Sandbox.create({ ...host().conn, template: 'code-interpreter' }),
      Sandbox.create({ ...host().conn, template: 'code-interpreter' }),
    ])
    try {
      const [r1, r2] = await Promise.all([one.runCode(code), two.runCode(code)])
      const [a1, b1] = JSON.parse(r1.logs.stdout.join(''))
      const [a2, b2] = JSON.parse(r2.logs.stdout.join(''))
      assert.notEqual(a1, a2)
      assert.notEqual(b1, b2)
    } finally {
      await Promise.all([one.kill(), two.kill()])
    }
  })

  it('a fork of a sandbox with a warm kernel starts with the same kernel state', async () => {
    await sbx.runCode('big = pd.DataFrame({"k": np.arange(1_000_000) % 7, "v": np.arange(1_000_000)})')
    const forks = await sbx.fork({ count: 2 })
    try {
      const answers = await Promise.all(forks.map((f, i) => f.runCode(`int(big[big.k == ${i}].v.sum())`)))
      assert.deepEqual(
        answers.map((a) => a.text),
        ['71428928571', '71428071429'],
      )
      await forks[0]?.runCode('big = None')
      assert.equal((await sbx.runCode('len(big)')).text, '1000000')
    } finally {
      await Promise.all(forks.map((f) => f.kill()))
    }
  })
})

describe('code interpreter on a template without IPython', () => {
  it('runs cells with state, a main result and tracebacks', async () => {
    await using base = await Sandbox.create({ ...host().conn })
    await base.runCode('x = 20')
    const e = await base.runCode('print("hi")\nx * 2 + 2')
    assert.equal(e.text, '42')
    assert.deepEqual(e.logs.stdout, ['hi\n'])
    const err = await base.runCode('[][1]')
    assert.equal(err.error?.name, 'IndexError')
    assert.match(err.error?.traceback ?? '', /IndexError: list index out of range/)
  })
})

describe('examples', () => {
  const run = (script: string, ...args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', `examples/${script}`, ...args], {
      env: { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey },
      timeout: 120_000,
    })

  it('code-interpreter.ts: describe() text and the bar chart as a PNG file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fbx-example-'))
    try {
      const out = join(dir, 'chart.png')
      const { stdout } = await run('code-interpreter.ts', out)
      assert.match(stdout, /revenue\s*\ncount\s+8\.0+/)
      assert.match(stdout, /totals: \{'west': 165, 'south': 200, 'north': 255, 'east': 310\}/)
      const size = pngSize(readFileSync(out).toString('base64'))
      assert.ok(size.width > 100 && size.height > 100, JSON.stringify(size))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('python/code_interpreter.py: the same loop through the Python SDK', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fbx-example-'))
    try {
      const out = join(dir, 'chart.png')
      const { stdout } = await promisify(execFile)(
        // the SDK's Python: Debian's python3 with httpx-sse added (scripts/python-venv.sh)
        execFileSync('bash', ['scripts/python-venv.sh']).toString().trim(),
        ['examples/python/code_interpreter.py', out],
        {
          env: {
            ...process.env,
            PYTHONPATH: 'python',
            FORKBOX_URL: host().conn.url,
            FORKBOX_API_KEY: host().conn.apiKey,
          },
          timeout: 120_000,
        },
      )
      assert.match(stdout, /totals: \{'west': 165, 'south': 200, 'north': 255, 'east': 310\}/)
      const size = pngSize(readFileSync(out).toString('base64'))
      assert.ok(size.width > 100 && size.height > 100, JSON.stringify(size))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('fork-per-query.ts: each fork answers from the loaded DataFrame; the original keeps it whole', async () => {
    const { stdout } = await run('fork-per-query.ts')
    assert.match(stdout, /3 forks in \d+ ms/)
    assert.match(stdout, /round\(df\.sales\.mean\(\), 2\) → \d+\.\d+/)
    assert.match(stdout, /original: 5000000 rows/)
  })
})
