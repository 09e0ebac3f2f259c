// The published `e2b` and `@e2b/code-interpreter` clients, unchanged, against a real forkbox on
// real runsc: configured only by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter'
import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  FilesystemEventType,
  NotFoundError,
  Sandbox,
  SandboxNotFoundError,
  TimeoutError,
} from 'e2b'
import { issueE2bKey, until, useTestHost } from './harness.ts'

const host = useTestHost({
  async setup(t) {
    const key = await issueE2bKey(t, 'e2b-clients')
    assert.match(key, /^e2b_[0-9a-f]{40}$/)
    process.env.E2B_API_URL = t.conn.url
    process.env.E2B_SANDBOX_URL = t.conn.url
    process.env.E2B_API_KEY = key
  },
})

const TIMEOUT_MS = 180_000
const text = new TextDecoder()

/** Polls `check` until it holds (or fails with what it last saw). */

async function withSandbox<T>(fn: (sbx: Sandbox) => Promise<T>): Promise<T> {
  const sbx = await Sandbox.create({ timeoutMs: TIMEOUT_MS })
  try {
    return await fn(sbx)
  } finally {
    await sbx.kill()
  }
}

describe('e2b clients against forkbox', () => {
  it('create → commands.run → files.write/read → kill, as the README does', async () => {
    const sbx = await Sandbox.create({ timeoutMs: TIMEOUT_MS, envs: { FROM_CREATE: 'yes' } })
    try {
      const hi = await sbx.commands.run('echo hi')
      assert.equal(hi.exitCode, 0)
      assert.equal(hi.stdout, 'hi\n')
      const who = await sbx.commands.run('whoami; pwd; echo "$HOME"')
      assert.equal(who.stdout, 'user\n/home/user\n/home/user\n')
      await sbx.files.write('/home/user/hello.txt', 'hello from e2b')
      assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello from e2b')
      // relative paths are under the user's home
      await sbx.files.write('notes/rel.txt', 'relative')
      assert.equal((await sbx.commands.run('cat /home/user/notes/rel.txt')).stdout, 'relative')
      const bytes = Uint8Array.from({ length: 256 }, (_, i) => i)
      await sbx.files.write('/tmp/bytes.bin', bytes.buffer)
      assert.deepEqual(await sbx.files.read('/tmp/bytes.bin', { format: 'bytes' }), bytes)
      await sbx.files.write('/tmp/streamed.txt', new Blob(['streamed']).stream(), { useOctetStream: true })
      assert.equal(await sbx.files.read('/tmp/streamed.txt'), 'streamed')
      await sbx.files.write('/tmp/zipped.txt', 'gzipped on the wire', { gzip: true })
      assert.equal(await sbx.files.read('/tmp/zipped.txt', { gzip: true }), 'gzipped on the wire')
      await assert.rejects(sbx.files.read('/home/user/missing.txt'), FileNotFoundError)
      const out: string[] = []
      const env = await sbx.commands.run('echo "$GREETING" >&2; echo out', {
        envs: { GREETING: 'hej' },
        cwd: '/tmp',
        onStdout: (d) => void out.push(d),
      })
      assert.equal(env.stderr, 'hej\n')
      assert.equal((await sbx.commands.run('echo "$FROM_CREATE"')).stdout, 'yes\n')
      assert.deepEqual(out, ['out\n'])
      await assert.rejects(sbx.commands.run('echo oops >&2; exit 3'), (err: unknown) => {
        assert.ok(err instanceof CommandExitError, String(err))
        assert.equal(err.exitCode, 3)
        assert.equal(err.stderr, 'oops\n')
        return true
      })
      assert.equal((await sbx.commands.run('id -u', { user: 'root' })).stdout, '0\n')
      assert.equal(await sbx.isRunning(), true)
    } finally {
      assert.equal(await sbx.kill(), true)
    }
    assert.equal(await sbx.isRunning(), false)
    assert.equal(await Sandbox.kill(sbx.sandboxId), false)
    await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError)
  })

  it("base has python and password-less sudo, as E2B's does", async () => {
    await withSandbox(async (sbx) => {
      assert.match((await sbx.commands.run('python --version')).stdout, /^Python 3\./)
      assert.equal((await sbx.commands.run('id -u', { user: 'root' })).stdout, '0\n')
      // E2B's envVars.test.ts: a command's envs do not reach the next one, sudo's included
      assert.equal((await sbx.commands.run('echo $FOO', { envs: { FOO: 'bar' } })).stdout.trim(), 'bar')
      const cmd2 = await sbx.commands.run('sudo echo "$FOO"')
      assert.equal(cmd2.exitCode, 0)
      assert.equal(cmd2.stdout.trim(), '')
      assert.equal((await sbx.commands.run('sudo id -u')).stdout, '0\n')
      // the sandbox's own names resolve from /etc/hosts, with no resolver to wait for
      assert.match((await sbx.commands.run('getent hosts localhost sandbox')).stdout, /127\.0\.1\.1\s+sbx-\w+ sandbox/)
    })
  })

  it('runs a background command, feeds its stdin and kills it', async () => {
    await withSandbox(async (sbx) => {
      const seen: string[] = []
      const cat = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => void seen.push(d) })
      await sbx.commands.sendStdin(cat.pid, 'ping\n')
      await until('the echo of stdin', () => seen.join('') === 'ping\n')
      await cat.sendStdin('pong\n')
      await until('the second echo', () => cat.stdout === 'ping\npong\n')
      assert.ok((await sbx.commands.list()).some((p) => p.pid === cat.pid))
      assert.equal(await cat.kill(), true)
      await assert.rejects(cat.wait(), (err: unknown) => err instanceof CommandExitError && err.exitCode === -1)
      await until('the killed command to leave the list', async () =>
        (await sbx.commands.list()).every((p) => p.pid !== cat.pid),
      )
      assert.equal(await sbx.commands.kill(999_999), false)

      // closeStdin: EOF reaches the command, which then ends on its own
      const wc = await sbx.commands.run('wc -c', { background: true, stdin: true })
      await wc.sendStdin('12345')
      await wc.closeStdin()
      assert.equal((await wc.wait()).stdout.trim(), '5')
      assert.equal(await sbx.commands.kill(wc.pid), false)
      // without stdin: true, stdin is closed (cat ends at once)
      assert.equal((await sbx.commands.run('cat; echo done')).stdout, 'done\n')

      // another client attaches to a running command by pid
      const ticker = await sbx.commands.run('for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.3; done', {
        background: true,
      })
      const again = await sbx.commands.connect(ticker.pid)
      const result = await again.wait()
      assert.match(result.stdout, /10\n$/)
      await ticker.wait()

      // timeoutMs ends the command (and only the command)
      const started = Date.now()
      await assert.rejects(sbx.commands.run('sleep 30; echo late', { timeoutMs: 1000 }), TimeoutError)
      assert.ok(Date.now() - started < 10_000)
      await until('the timed-out command to end', async () =>
        (await sbx.commands.list()).every((p) => !p.cmd.includes('sleep 30') && !p.args.join(' ').includes('sleep 30')),
      )
      assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n')
    })
  })

  it('forks a sandbox and snapshots it; both keep its state', async () => {
    await withSandbox(async (sbx) => {
      await sbx.files.write('/home/user/mark.txt', 'original')
      const forks = await sbx.fork({ count: 2, timeoutMs: TIMEOUT_MS })
      try {
        const [a, b] = forks
        assert.ok(a instanceof Sandbox && b instanceof Sandbox, String(forks))
        assert.notEqual(a.sandboxId, b.sandboxId)
        assert.equal(await a.files.read('/home/user/mark.txt'), 'original')
        await a.files.write('/home/user/mark.txt', 'changed in a')
        assert.equal(await b.files.read('/home/user/mark.txt'), 'original')
        assert.equal(await sbx.files.read('/home/user/mark.txt'), 'original')
      } finally {
        for (const f of forks) if (f instanceof Sandbox) await f.kill()
      }
      const snap = await sbx.createSnapshot()
      assert.ok((await sbx.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId))
      const restored = await Sandbox.create(snap.snapshotId, { timeoutMs: TIMEOUT_MS })
      try {
        assert.equal(await restored.files.read('/home/user/mark.txt'), 'original')
      } finally {
        await restored.kill()
      }
      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
      // a named snapshot: created from, and listed, by its name
      const named = await sbx.createSnapshot({ name: 'e2b-golden' })
      assert.deepEqual(named.names, ['e2b-golden', named.snapshotId])
      const listed = await Sandbox.listSnapshots({ name: 'e2b-golden' }).nextItems()
      assert.deepEqual(
        listed.map((s) => s.snapshotId),
        [named.snapshotId],
      )
      const fromName = await Sandbox.create('e2b-golden', { timeoutMs: TIMEOUT_MS })
      try {
        assert.equal(await fromName.files.read('/home/user/mark.txt'), 'original')
      } finally {
        await fromName.kill()
      }
      assert.equal(await Sandbox.deleteSnapshot(named.snapshotId), true)
    })
  })

  it('lists, makes, checks and removes files and directories', async () => {
    await withSandbox(async (sbx) => {
      assert.equal(await sbx.files.makeDir('/home/user/proj/src'), true)
      assert.equal(await sbx.files.makeDir('/home/user/proj/src'), false)
      await sbx.files.write([
        { path: '/home/user/proj/a.txt', data: 'a' },
        { path: '/home/user/proj/src/b.txt', data: 'bb' },
      ])
      const entries = await sbx.files.list('/home/user/proj')
      assert.deepEqual(
        entries.map((e) => [e.name, e.type]),
        [
          ['a.txt', 'file'],
          ['src', 'dir'],
        ],
      )
      const a = entries[0]
      assert.equal(a?.path, '/home/user/proj/a.txt')
      assert.equal(a?.owner, 'user')
      assert.match(a?.permissions ?? '', /^-rw/)
      assert.equal((await sbx.files.list('/home/user/proj', { depth: 2 })).length, 3)
      assert.equal((await sbx.files.getInfo('/home/user/proj/src/b.txt')).size, 2)
      assert.equal(await sbx.files.exists('/home/user/proj/a.txt'), true)
      const moved = await sbx.files.rename('/home/user/proj/a.txt', '/home/user/proj/c.txt')
      assert.equal(moved.path, '/home/user/proj/c.txt')
      await sbx.files.remove('/home/user/proj/c.txt')
      assert.equal(await sbx.files.exists('/home/user/proj/c.txt'), false)
      await sbx.files.remove('/home/user/proj')
      assert.equal(await sbx.files.exists('/home/user/proj'), false)
      // removing what is not there succeeds, as envd's Remove does
      await sbx.files.remove('/home/user/proj')
      // a symlink's target as an absolute path
      await sbx.files.write('/home/user/target.txt', 't')
      await sbx.commands.run('ln -s target.txt /home/user/link.txt')
      const link = await sbx.files.getInfo('/home/user/link.txt')
      assert.equal(link.symlinkTarget, '/home/user/target.txt')
      await assert.rejects(sbx.files.list('/home/user/nope'), FileNotFoundError)
    })
  })

  it('keeps file metadata written with a file; getInfo, list and a watch event with its entry give it back', async () => {
    await withSandbox(async (sbx) => {
      const seen: { name: string; type: string; entry?: { metadata?: Record<string, string> } }[] = []
      const handle = await sbx.files.watchDir('/home/user', (e) => void seen.push(e), { includeEntry: true })
      const written = await sbx.files.write('/home/user/meta.txt', 'm', { metadata: { author: 'alice', build: '42' } })
      assert.deepEqual(written.metadata, { author: 'alice', build: '42' })
      assert.deepEqual((await sbx.files.getInfo('/home/user/meta.txt')).metadata, { author: 'alice', build: '42' })
      const listed = (await sbx.files.list('/home/user')).find((e) => e.name === 'meta.txt')
      assert.deepEqual(listed?.metadata, { author: 'alice', build: '42' })
      // a write replaces it
      await sbx.files.write('/home/user/meta.txt', 'n', { metadata: { author: 'bob' } })
      assert.deepEqual((await sbx.files.getInfo('/home/user/meta.txt')).metadata, { author: 'bob' })
      await sbx.files.write('/home/user/meta.txt', 'o')
      assert.equal((await sbx.files.getInfo('/home/user/meta.txt')).metadata, undefined)
      await until('a create event with its entry', () =>
        seen.some((e) => e.name === 'meta.txt' && e.type === FilesystemEventType.CREATE && e.entry !== undefined),
      )
      await handle.stop()
    })
  })

  it('watches a directory (recursive), as watchDir does, and stops cleanly', async () => {
    await withSandbox(async (sbx) => {
      await sbx.files.makeDir('/home/user/watched')
      const seen: { name: string; type: string }[] = []
      let exited = false
      const handle = await sbx.files.watchDir('/home/user/watched', (e) => void seen.push(e), {
        recursive: true,
        onExit: () => {
          exited = true
        },
      })
      await sbx.files.write('/home/user/watched/a.txt', 'a')
      await sbx.files.makeDir('/home/user/watched/sub')
      await sbx.commands.run('sleep 0.3; echo b > /home/user/watched/sub/b.txt; chmod 600 /home/user/watched/a.txt')
      await sbx.files.rename('/home/user/watched/a.txt', '/home/user/watched/c.txt')
      await sbx.files.remove('/home/user/watched/c.txt')
      const has = (type: string, name: string) => seen.some((e) => e.type === type && e.name === name)
      await until(
        `create, write, chmod, rename, remove events (saw ${JSON.stringify(seen)})`,
        () =>
          has(FilesystemEventType.CREATE, 'a.txt') &&
          has(FilesystemEventType.WRITE, 'a.txt') &&
          has(FilesystemEventType.CREATE, 'sub/b.txt') &&
          has(FilesystemEventType.CHMOD, 'a.txt') &&
          has(FilesystemEventType.RENAME, 'a.txt') &&
          has(FilesystemEventType.REMOVE, 'c.txt'),
        10_000,
      )
      await handle.stop()
      const count = seen.length
      await sbx.files.write('/home/user/watched/late.txt', 'x')
      await new Promise((r) => setTimeout(r, 500))
      assert.equal(seen.length, count, 'an event after stop()')
      await until('onExit', () => exited, 5_000)
      // a missing directory is refused before any event
      await assert.rejects(
        sbx.files.watchDir('/home/user/nope', () => {}),
        (e: unknown) => e instanceof FileNotFoundError || e instanceof NotFoundError,
      )
    })
  })

  it('downloadUrl / uploadUrl: signed URLs that need no token, for their one path, until they expire', async () => {
    await withSandbox(async (sbx) => {
      // the URL names its sandbox by host name (49983-{id}.{domain}); with one shared sandbox URL,
      // as here, the request says it with the header instead: no token, no key
      const fetchSigned = (url: string, init: RequestInit = {}) =>
        fetch(url, { ...init, headers: { 'E2b-Sandbox-Id': sbx.sandboxId } })
      const up = await sbx.uploadUrl('/home/user/signed.txt')
      assert.match(up, /signature=v1_/)
      const form = new FormData()
      form.append('file', new Blob(['signed upload']), 'signed.txt')
      assert.equal((await fetchSigned(up, { method: 'POST', body: form })).status, 200)
      const down = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 })
      assert.match(down, /signature_expiration=\d+/)
      const got = await fetchSigned(down)
      assert.equal(got.status, 200)
      assert.equal(await got.text(), 'signed upload')
      assert.equal((await fetchSigned(down.replace('signed.txt', 'other.txt'))).status, 401)
      const expired = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -5 })
      assert.equal((await fetchSigned(expired)).status, 401)
    })
  })

  it('opens a terminal, types into it and resizes it', async () => {
    await withSandbox(async (sbx) => {
      let screen = ''
      const term = await sbx.pty.create({
        cols: 80,
        rows: 24,
        onData: (d) => {
          screen += text.decode(d)
        },
      })
      const type = (s: string) => sbx.pty.sendInput(term.pid, new TextEncoder().encode(s))
      await type('stty size; tty\n')
      await until('the terminal size and name', () => screen.includes('24 80') && /\/dev\/pts\/\d/.test(screen))
      await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
      await type('stty size\n')
      await until('the new size', () => screen.includes('30 100'))
      assert.ok((await sbx.commands.list()).some((p) => p.pid === term.pid))
      await type('exit\n')
      assert.equal((await term.wait()).exitCode, 0)
    })
  })

  it('lists sandboxes by metadata (paged), sets timeouts and reads info', async () => {
    const run = `r${Date.now()}`
    const a = await Sandbox.create({ timeoutMs: TIMEOUT_MS, metadata: { run, role: 'a' } })
    const b = await Sandbox.create({ timeoutMs: TIMEOUT_MS, metadata: { run, role: 'b' } })
    try {
      const onlyA = await Sandbox.list({ query: { metadata: { run, role: 'a' } } }).nextItems()
      assert.deepEqual(
        onlyA.map((s) => s.sandboxId),
        [a.sandboxId],
      )
      assert.equal(onlyA[0]?.state, 'running')
      assert.equal(onlyA[0]?.templateId, 'base')
      assert.deepEqual(
        await Sandbox.list({ query: { metadata: { run }, template: 'code-interpreter-v1' } }).nextItems(),
        [],
      )
      const pager = Sandbox.list({ query: { metadata: { run } }, limit: 1 })
      const seen = [...(await pager.nextItems())]
      assert.equal(pager.hasNext, true)
      seen.push(...(await pager.nextItems()))
      assert.equal(pager.hasNext, false)
      assert.deepEqual(seen.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())

      await a.setTimeout(3_600_000)
      const info = await a.getInfo()
      assert.ok(info.endAt.getTime() - Date.now() > 3_000_000, String(info.endAt))
      assert.deepEqual(info.metadata, { run, role: 'a' })
      // forkbox samples usage every 5 s
      await until('a metrics sample', async () => (await a.getMetrics()).length > 0, 20_000)
      const [m] = await a.getMetrics()
      assert.ok(m && m.memUsed > 0 && m.memTotal >= m.memUsed && m.cpuCount > 0 && m.diskTotal > 0, JSON.stringify(m))
      assert.ok(m.timestamp instanceof Date && !Number.isNaN(m.timestamp.getTime()))
      await b.setTimeout(30_000)
      assert.ok((await b.getInfo()).endAt.getTime() - Date.now() < 60_000)
    } finally {
      await a.kill()
      await b.kill()
    }
    assert.deepEqual(await Sandbox.list({ query: { metadata: { run } } }).nextItems(), [])
  })

  it("maps E2B's egress settings to forkbox's network policy", async () => {
    const policy = async (id: string) => {
      const res = await fetch(`${host().conn.url}/v1/sandboxes/${id}`, {
        headers: { 'X-API-KEY': process.env.E2B_API_KEY ?? '' },
      })
      return ((await res.json()) as { network: unknown }).network
    }
    await withSandbox(async (sbx) => {
      // forkbox's default stays: no network
      assert.deepEqual(await policy(sbx.sandboxId), { internet: false, allowOut: [], denyOut: [], ports: [] })
      assert.equal((await sbx.getInfo()).allowInternetAccess, false)
    })
    const listed = await Sandbox.create({
      timeoutMs: TIMEOUT_MS,
      network: { denyOut: ['0.0.0.0/0'], allowOut: ['203.0.113.7', 'pypi.org'] },
    })
    try {
      assert.deepEqual(await policy(listed.sandboxId), {
        internet: true,
        allowOut: ['203.0.113.7', 'pypi.org'],
        denyOut: [],
        ports: [],
      })
      const info = await listed.getInfo()
      assert.equal(info.allowInternetAccess, true)
      assert.deepEqual(info.network?.allowOut, ['203.0.113.7', 'pypi.org'])
      await listed.updateNetwork({ allowInternetAccess: false })
      assert.equal(((await policy(listed.sandboxId)) as { internet: boolean }).internet, false)
      await listed.updateNetwork({ denyOut: ['198.51.100.0/24'] })
      assert.deepEqual(await policy(listed.sandboxId), {
        internet: true,
        allowOut: [],
        denyOut: ['198.51.100.0/24'],
        ports: [],
      })
    } finally {
      await listed.kill()
    }
  })

  it('pauses a sandbox; connect resumes it with its files and processes', async () => {
    await withSandbox(async (sbx) => {
      await sbx.files.write('/home/user/state.txt', 'kept')
      const sleeper = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
      assert.equal(await sbx.pause(), true)
      assert.equal((await sbx.getInfo()).state, 'paused')
      assert.equal(await sbx.pause(), false)
      assert.equal(await sbx.isRunning(), false)
      const back = await Sandbox.connect(sbx.sandboxId)
      assert.equal((await back.getInfo()).state, 'running')
      assert.equal(await back.files.read('/home/user/state.txt'), 'kept')
      assert.ok((await back.commands.list()).some((p) => p.pid === sleeper.pid))
      assert.equal((await back.commands.run('echo awake')).stdout, 'awake\n')
    })
  })

  it('runs code: state across cells, a plot as PNG, a DataFrame as HTML, an error with its traceback', async () => {
    const ci = await CodeInterpreter.create({ timeoutMs: TIMEOUT_MS })
    try {
      await ci.runCode('x = 21')
      const answer = await ci.runCode('x * 2')
      assert.equal(answer.text, '42')
      assert.equal(answer.error, undefined)
      const cellEnv = await ci.runCode('import os\nos.environ.get("CELL_VAR")', { envs: { CELL_VAR: 'c' } })
      // a string shows as itself, as E2B's interpreter shows it (E2B's cwd and env tests read it so)
      assert.equal(cellEnv.text, 'c')
      const printed = await ci.runCode('print("hello")')
      assert.deepEqual(printed.logs.stdout, ['hello\n'])
      const plot = await ci.runCode(
        'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title("forkbox")\nplt.show()',
      )
      const png = plot.results.find((r) => r.png)?.png
      assert.ok(png, JSON.stringify(plot.results.map((r) => r.formats())))
      assert.ok(Buffer.from(png, 'base64').subarray(0, 8).equals(Buffer.from('\x89PNG\r\n\x1a\n', 'latin1')))
      // as E2B's interpreter: a PIL image shows when saved
      const saved = await ci.runCode(
        'import numpy\nfrom PIL import Image\nimg = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype("uint8")).convert("RGBA")\nimg.save("/tmp/test.png")',
      )
      assert.ok(saved.results[0]?.png, JSON.stringify(saved.error ?? saved.results.map((r) => r.formats())))
      const df = await ci.runCode('import pandas as pd\npd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3.5, 19.0]})')
      assert.match(df.results[0]?.html ?? '', /<table[\s\S]*Oslo[\s\S]*Lima/)
      assert.equal(df.results[0]?.isMainResult, true)
      // E2B's `data`: the columns as lists
      assert.deepEqual(df.results[0]?.data, { city: ['Oslo', 'Lima'], temp: [3.5, 19.0] })
      const err = await ci.runCode('def f():\n    return 1 / 0\nf()')
      assert.equal(err.error?.name, 'ZeroDivisionError')
      assert.equal(err.error?.value, 'division by zero')
      assert.match(err.error?.traceback ?? '', /ZeroDivisionError/)
      assert.match(err.error?.traceback ?? '', /return 1 \/ 0/)
      const streamed: string[] = []
      await ci.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)', {
        onStderr: (m) => void streamed.push(m.line),
      })
      assert.deepEqual(streamed, ['err\n'])

      const ctx = await ci.createCodeContext({ cwd: '/tmp' })
      await ci.runCode('y = "own context"', { context: ctx })
      assert.equal((await ci.runCode('import os; os.getcwd()', { context: ctx })).text, '/tmp')
      assert.equal((await ci.runCode('y', { context: ctx })).text, 'own context')
      assert.equal((await ci.runCode('"y" in globals()')).text, 'False')
      assert.ok((await ci.listCodeContexts()).some((c) => c.id === ctx.id))
      await ci.restartCodeContext(ctx)
      assert.equal((await ci.runCode('"y" in globals()', { context: ctx })).text, 'False')
      await ci.removeCodeContext(ctx)
      assert.ok(!(await ci.listCodeContexts()).some((c) => c.id === ctx.id))
      assert.equal((await ci.runCode('echo from bash', { language: 'bash' })).logs.stdout.join(''), 'from bash\n')
      // a cell's envs are that cell's: bash gets its own values back after it
      const bashEnv = await ci.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'bar' } })
      assert.equal(bashEnv.logs.stdout.join(''), 'bar\n')
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion
      const after = await ci.runCode('echo ${FOO:-default}', { language: 'bash' })
      assert.equal(after.logs.stdout.join(''), 'default\n')
      // the default contexts are listed from the start, each with its working directory
      const listed = await ci.listCodeContexts()
      for (const language of ['python', 'javascript'])
        assert.ok(
          listed.some((c) => c.language === language && c.cwd === '/home/user'),
          `a default ${language} context in /home/user: ${JSON.stringify(listed)}`,
        )
      // JavaScript: a string as itself, ES module imports, an awaited last expression
      assert.equal((await ci.runCode('process.cwd()', { language: 'js' })).text, '/home/user')
      const imported = await ci.runCode("import { join } from 'node:path'\njoin('a', 'b')", { language: 'js' })
      assert.equal(imported.text, 'a/b', JSON.stringify(imported.error))
      assert.equal((await ci.runCode("await Promise.resolve('Hello World!')", { language: 'js' })).text, 'Hello World!')
      // TypeScript (E2B's `ts`), and `python` as a command, as E2B's template has them
      const typed = await ci.runCode('const message: string = "Hello World!"; console.log(message)', { language: 'ts' })
      assert.deepEqual(typed.logs.stdout, ['Hello World!\n'], JSON.stringify(typed.error))
      assert.equal((await ci.runCode('process.cwd()', { language: 'ts' })).text, '/home/user')
      assert.equal((await ci.commands.run('python -c "print(6 * 7)"')).stdout, '42\n')
      // a figure's chart as data, as E2B's interpreter extracts it
      const charted = await ci.runCode(
        'import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [1, 2])\nplt.title("Bars")\nplt.show()',
      )
      const chart = charted.results.find((r) => r.chart)?.chart
      assert.equal(chart?.type, 'bar', JSON.stringify(charted.error))
      assert.equal(chart?.title, 'Bars')
      assert.deepEqual(
        chart?.elements.map((e: { label: string; value: unknown }) => [e.label, e.value]),
        [
          ['a', 1],
          ['b', 2],
        ],
      )
      // a cell past its timeoutMs is stopped; the kernel and its state live on
      await assert.rejects(ci.runCode('import time\ntime.sleep(30)', { timeoutMs: 1000 }), TimeoutError)
      assert.equal((await ci.runCode('x + 1')).text, '22')
    } finally {
      await ci.kill()
    }
  })

  it('a command or a cell running when its sandbox is killed fails as E2B says it: the sandbox was killed', async () => {
    const sbx = await Sandbox.create({ timeoutMs: TIMEOUT_MS })
    const run = sbx.commands.run('sleep 30')
    run.catch(() => {})
    await new Promise((r) => setTimeout(r, 1500))
    await Sandbox.kill(sbx.sandboxId)
    await assert.rejects(run, (e: Error) => {
      assert.match(e.message, /killed or reached its end of life/)
      return true
    })
    const ci = await CodeInterpreter.create({ timeoutMs: TIMEOUT_MS })
    const cell = ci.runCode('import time; time.sleep(60)')
    cell.catch(() => {})
    await new Promise((r) => setTimeout(r, 2000))
    await ci.kill()
    await assert.rejects(cell, (e: Error) => {
      assert.ok(e instanceof TimeoutError, `${e.name}: ${e.message}`)
      assert.match(e.message, /sandbox was killed while the request was in progress/)
      return true
    })
  })

  it("lifecycle onTimeout 'pause': at its timeout the sandbox pauses instead of dying; connect resumes it as it was", async () => {
    const sbx = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    try {
      await sbx.files.write('/home/user/kept.txt', 'kept')
      await sbx.commands.run('sleep 3600', { background: true })
      await until(
        'the sandbox paused at its timeout',
        async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused',
        60_000,
      )
      const info = await Sandbox.getInfo(sbx.sandboxId)
      assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: true })
      const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: TIMEOUT_MS })
      assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
      // the background command runs on (E2B runs it as `bash -l -c 'sleep 3600'`)
      const running = await back.commands.list()
      assert.ok(
        running.some((p) => [p.cmd, ...p.args].some((a) => a.includes('sleep 3600'))),
        JSON.stringify(running),
      )
    } finally {
      await Sandbox.kill(sbx.sandboxId)
    }
  })

  it('a filesystem-only pause (keepMemory: false) keeps the whole disk; the sandbox comes back as if booted', async () => {
    const sbx = await Sandbox.create({
      timeoutMs: 3_000,
      lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: false },
    })
    try {
      await sbx.files.write('/home/user/kept.txt', 'kept')
      // the image's own dirs too, not only the homes
      await sbx.commands.run('echo tool > /usr/local/bin/made-here && chmod +x /usr/local/bin/made-here', {
        user: 'root',
      })
      await sbx.commands.run('sleep 3600', { background: true })
      await until(
        'the sandbox paused at its timeout',
        async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused',
        60_000,
      )
      const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: TIMEOUT_MS })
      assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
      assert.equal(await back.files.read('/usr/local/bin/made-here'), 'tool\n')
      const gone = (ps: { cmd: string; args: string[] }[]) =>
        ps.every((p) => ![p.cmd, ...p.args].some((a) => a.includes('sleep')))
      assert.ok(gone(await back.commands.list()), 'no process lives through a filesystem-only pause')
      // and by hand: pause({ keepMemory: false })
      await back.commands.run('sleep 3601', { background: true })
      await back.files.write('/home/user/second.txt', 'second')
      assert.equal(await back.pause({ keepMemory: false }), true)
      assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
      const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: TIMEOUT_MS })
      assert.equal(await again.files.read('/home/user/second.txt'), 'second')
      assert.ok(gone(await again.commands.list()))
      assert.equal((await again.commands.run('echo alive')).stdout, 'alive\n')
    } finally {
      await Sandbox.kill(sbx.sandboxId)
    }
  })

  it('answers errors E2B-shaped, with a stable code', async () => {
    await assert.rejects(Sandbox.connect('sbx-00000000000000000000'), SandboxNotFoundError)
    await assert.rejects(Sandbox.create('no-such-template'), (err: unknown) => {
      assert.match(String(err), /404: no template named no-such-template/)
      return true
    })
    await assert.rejects(Sandbox.list({ apiKey: 'e2b_0000' }).nextItems(), AuthenticationError)
    const url = host().conn.url
    const res = await fetch(`${url}/sandboxes/sbx-nope`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY ?? '' } })
    assert.equal(res.status, 404)
    assert.deepEqual(Object.keys(await res.json()).sort(), ['code', 'errorCode', 'message', 'requestId'])
    // envd calls need the sandbox's access token
    await withSandbox(async (sbx) => {
      const rpc = await fetch(`${url}/filesystem.Filesystem/Stat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' },
        body: JSON.stringify({ path: '/tmp' }),
      })
      assert.equal(rpc.status, 401)
      const body = (await rpc.json()) as { code: string; errorCode: string }
      assert.equal(body.code, 'unauthenticated')
      assert.equal(body.errorCode, 'UNAUTHENTICATED')
      await assert.rejects(sbx.files.read('/etc/shadow-nope'), NotFoundError)
    })
  })
})
