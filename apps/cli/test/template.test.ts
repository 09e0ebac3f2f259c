// `forkbox template`: builds from a context directory or an image against the real server app,
// the live display on a terminal and plain lines elsewhere, failures, ls, rm and logs.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { Template } from '@forkbox/sdk'
import { useHarness } from './harness.ts'

const harness = useHarness()
const body = (req: { body: Uint8Array } | undefined) => JSON.parse(new TextDecoder().decode(req?.body))
const dirs: string[] = []
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function project(): string {
  const dir = mkdtempSync(join(tmpdir(), 'forkbox-cli-build-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'Dockerfile'), 'FROM forkbox:base\n')
  mkdirSync(join(dir, 'app'))
  writeFileSync(join(dir, 'app', 'x.txt'), 'x')
  return dir
}

/** A terminal's stderr for the live display: what was written to it, ANSI codes and all. */
function terminal(): { stream: NodeJS.WriteStream; text(): string } {
  let text = ''
  const stream = {
    isTTY: true,
    columns: 60,
    write: (chunk: string) => {
      text += chunk
      return true
    },
  }
  return { stream: stream as unknown as NodeJS.WriteStream, text: () => text }
}

describe('forkbox template build', () => {
  it("builds CONTEXT's Dockerfile with its context and build args, lines to stderr, NAME@VERSION to stdout", async () => {
    const h = harness()
    const dir = project()
    const code = await h.run('template', 'build', '-t', 'app', '--build-arg', 'A=1', '--build-arg', 'B=x=y', dir)
    assert.equal(code, 0, h.stderr())
    assert.equal(h.stdout(), 'app@1\n')
    assert.deepEqual(body(h.requests[0]), {
      name: 'app',
      dockerfile: 'FROM forkbox:base\n',
      buildArgs: { A: '1', B: 'x=y' },
      context: true,
    })
    assert.match(h.stderr(), /^context: Dockerfile \(18 bytes\), app\/, app\/x\.txt \(1 bytes\)$/m)
    assert.match(h.stderr(), /^\[step 1\] step output$/m)
    assert.match(h.stderr(), /^ready in /m)
  })

  it('takes the Dockerfile from -f and an image with --image (never both)', async () => {
    const h = harness()
    const dir = project()
    const other = join(dir, 'other.Dockerfile')
    writeFileSync(other, 'FROM forkbox:base\nRUN true\n')
    assert.equal(await h.run('template', 'build', '-t', 'df', '-f', other, dir), 0, h.stderr())
    assert.equal(body(h.requests[0]).dockerfile, 'FROM forkbox:base\nRUN true\n')
    const img = ['-t', 'img', '--image', 'registry.local/x:1', '--start-cmd', 'srv --port 80', '--ready-cmd', 'true']
    assert.equal(await h.run('template', 'build', ...img), 0, h.stderr())
    assert.deepEqual(body(h.requests.find((r) => r.method === 'POST' && body(r).name === 'img')), {
      name: 'img',
      image: 'registry.local/x:1',
      startCmd: 'srv --port 80',
      readyCmd: 'true',
    })
    assert.match(h.stdout(), /^df@1\nimg@1\n$/)
    assert.equal(await h.run('template', 'build', '-t', 'both', '--image', 'x:1', '-f', other), 1)
    assert.match(h.stderr(), /forkbox: USAGE: give --image or a Dockerfile \(-f\), not both\n$/)
    assert.equal(await h.run('template', 'build', '-t', 'none', join(dir, 'app')), 1)
    assert.match(h.stderr(), /forkbox: USAGE: cannot read the Dockerfile .*app\/Dockerfile/)
  })

  it('on a terminal shows each step as it finishes; a failure shows the failing step and exits 1', async () => {
    const term = terminal()
    const h = harness({ progressStream: term.stream })
    h.server.agent.stepLines = 12
    assert.equal(await h.run('template', 'build', '-t', 'live', '--image', 'img:1'), 0, h.stderr())
    // kept lines: each step with its time, and of the build's own lines between steps the last one
    const kept = term
      .text()
      .split('\n')
      .map((l) => l.slice(l.lastIndexOf('\u001b[2K') + 4))
    assert.match(
      kept.join('\n'),
      /^ {2}build bld-\w+: version 1 of live\n✓ step 1 \(\d+\.\ds\)\n✓ step 2 \(\d+\.\ds\)\n/,
    )
    assert.match(kept.join('\n'), /\n {2}ready in [\d.]+ s\n$/)
    assert.ok(term.text().includes('\r\u001b[2K'), 'the live line is redrawn in place')
    assert.match(term.text(), /. step 2 \(\d+\.\ds\) line 11/)
    assert.doesNotMatch(h.stderr(), /line 11/, 'the lines go to the live display, not as plain lines')

    const failing = terminal()
    const f = harness({ progressStream: failing.stream })
    f.server.agent.stepLines = 12
    f.server.agent.buildError = new AppError('IMAGE_NOT_FOUND', 'image nope:1 not found in its registry')
    assert.equal(await f.run('template', 'build', '-t', 'broken', '--image', 'nope:1'), 1)
    assert.match(
      failing.text(),
      /✗ failed: image nope:1 not found in its registry\nthe last lines of step 2:\n {2}\[step 2\] line 10\n {2}\[step 2\] line 11\n$/,
    )
    assert.equal(f.stderr(), 'forkbox: IMAGE_NOT_FOUND: image nope:1 not found in its registry\n')
    assert.equal(f.stdout(), '')
  })

  it('Ctrl-C stops following and exits 130; the build carries on', async () => {
    const h = harness()
    let release = () => {}
    h.server.agent.buildGate = new Promise((r) => {
      release = r
    })
    const running = h.run('template', 'build', '-t', 'slow', '--image', 'img:1')
    await new Promise((r) => setTimeout(r, 50))
    h.interrupt()
    assert.equal(await running, 130)
    assert.match(h.stderr(), /stopped following the build; it carries on on the server/)
    release()
    const built = await Template.get('slow', h.server.conn())
    const build = await Template.waitForBuild(built.builds[0]?.id ?? '', h.server.conn())
    assert.equal(build.status, 'ready')
  })
})

describe('forkbox template ls, rm, builds and logs', () => {
  it('lists built-ins and own templates, removes them, and prints or follows a build log', async () => {
    const h = harness()
    const built = await Template.build({ ...h.server.conn(), name: 'mine', image: 'img:1', description: 'my env' })
    assert.equal(await h.run('template', 'ls'), 0)
    assert.equal(
      h.stdout(),
      'NAME  VERSION   VISIBILITY  DESCRIPTION\nbase  built-in  -           fake\nmine  1         private     my env\n',
    )
    assert.equal(await h.run('template', 'builds', 'mine'), 0)
    assert.match(h.stdout(), new RegExp(`${built.id}  1        ready   `))
    const logs = (await Template.getBuild(built.id, h.server.conn())).logs
    for (const args of [
      ['template', 'logs', built.id],
      ['template', 'logs', '-f', built.id],
    ]) {
      const l = harness()
      l.ctx.connection = h.ctx.connection
      assert.equal(await l.run(...args), 0, l.stderr())
      assert.equal(l.stdout(), logs.map((e) => `${e.step === null ? '' : `[step ${e.step}] `}${e.message}\n`).join(''))
    }
    assert.equal(await h.run('template', 'rm', 'mine', 'nope'), 1)
    assert.match(h.stdout(), /\nmine\n$/)
    assert.match(h.stderr(), /forkbox: TEMPLATE_NOT_FOUND: no template named nope\n$/)
  })

  it('logs -f of a failed build exits 1 with its error', async () => {
    const h = harness()
    h.server.agent.buildError = new AppError('IMAGE_NOT_FOUND', 'gone')
    const err = await Template.build({ ...h.server.conn(), name: 'bad', image: 'x:1' }).catch((e: unknown) => e)
    const buildId = (err as { buildId: string }).buildId
    assert.equal(await h.run('template', 'logs', '-f', buildId), 1)
    assert.match(h.stdout(), /^failed: gone$/m)
    assert.equal(h.stderr(), 'forkbox: IMAGE_NOT_FOUND: gone\n')
  })
})
