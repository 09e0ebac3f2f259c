// The conformance behaviours (behaviours.json) through the TypeScript SDK.
import assert from 'node:assert/strict'
import { AuthenticationError, type ConnectionOptions, ForkboxClient, NotFoundError, Sandbox } from '@forkbox/sdk'

export type Results = Record<string, { ok: boolean; error?: string }>

export async function runTsBehaviours(conn: ConnectionOptions): Promise<Results> {
  const results: Results = {}
  let ci: Sandbox | undefined
  const codeSandbox = async () => {
    ci ??= await Sandbox.create({ ...conn, template: 'code-interpreter', ttlSeconds: 600 })
    return ci
  }
  const behaviours: Record<string, () => Promise<void>> = {
    async create_and_exec() {
      await using sbx = await Sandbox.create(conn)
      const r = await sbx.exec('echo hi')
      assert.deepEqual([r.exitCode, r.stdout], [0, 'hi\n'])
      assert.equal((await sbx.exec('exit 3')).exitCode, 3)
    },
    async exec_streaming() {
      await using sbx = await Sandbox.create(conn)
      const pieces: string[] = []
      const r = await sbx.exec('for i in 1 2 3; do echo $i; sleep 0.2; done', { onStdout: (d) => pieces.push(d) })
      assert.equal(pieces.join(''), '1\n2\n3\n')
      assert.ok(pieces.length >= 2)
      assert.equal(r.stdout, '1\n2\n3\n')
    },
    async files_roundtrip() {
      await using sbx = await Sandbox.create(conn)
      await sbx.files.write('/work/a.txt', 'hello')
      assert.equal(await sbx.files.read('/work/a.txt'), 'hello')
      assert.equal(await sbx.files.exists('/work/a.txt'), true)
      assert.ok((await sbx.files.list('/work')).some((e) => e.name === 'a.txt'))
      await sbx.files.remove('/work/a.txt')
      assert.equal(await sbx.files.exists('/work/a.txt'), false)
      await assert.rejects(
        sbx.files.read('/work/a.txt'),
        (e: NotFoundError) => e instanceof NotFoundError && e.code === 'FILE_NOT_FOUND',
      )
    },
    async run_code_state() {
      const sbx = await codeSandbox()
      await sbx.runCode('x = 1')
      assert.equal((await sbx.runCode('x + 1')).text, '2')
    },
    async run_code_rich() {
      const sbx = await codeSandbox()
      const html = (await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})')).results[0]?.html
      assert.ok(html?.includes('<table'))
      const figure = (await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()')).results.find(
        (r) => r.png,
      )
      const png = figure?.png
      assert.equal(figure?.chart?.type, 'line')
      assert.equal(
        Buffer.from(png ?? '', 'base64')
          .subarray(1, 4)
          .toString(),
        'PNG',
      )
    },
    async run_code_error() {
      const e = await (await codeSandbox()).runCode('1 / 0')
      assert.equal(e.error?.name, 'ZeroDivisionError')
    },
    async fork() {
      await using parent = await Sandbox.create(conn)
      await parent.files.write('/work/f.txt', 'parent')
      const [a, b] = (await parent.fork({ count: 2 })) as [Sandbox, Sandbox]
      try {
        assert.equal(await a.files.read('/work/f.txt'), 'parent')
        assert.equal(await b.files.read('/work/f.txt'), 'parent')
        await a.files.write('/work/f.txt', 'a')
        assert.equal(await b.files.read('/work/f.txt'), 'parent')
        assert.equal(await parent.files.read('/work/f.txt'), 'parent')
      } finally {
        await Promise.all([a.kill(), b.kill()])
      }
    },
    async error_not_found() {
      await assert.rejects(
        Sandbox.connect('sbx-does-not-exist', conn),
        (e: NotFoundError) =>
          e instanceof NotFoundError && e.status === 404 && e.code === 'SANDBOX_NOT_FOUND' && Boolean(e.requestId),
      )
    },
    async error_auth() {
      await assert.rejects(
        Sandbox.list({ ...conn, apiKey: 'fbx_wrong' }),
        (e: AuthenticationError) => e instanceof AuthenticationError && e.status === 401,
      )
    },
    async background_process() {
      await using sbx = await Sandbox.create(conn)
      const proc = await sbx.exec(['python3', '-c', 'print(input()[::-1])'], { background: true })
      assert.ok((await sbx.processes.list()).some((p) => p.pid === proc.pid))
      await proc.sendStdin('forkbox\n')
      let out = ''
      const exit = await proc.wait({ onStdout: (d) => (out += d) })
      assert.deepEqual([exit.exitCode, out], [0, 'xobkrof\n'])
    },
    async network_policy() {
      await using sbx = await Sandbox.create(conn)
      assert.equal(sbx.info.network.internet, false)
      const info = await sbx.updateNetwork({ internet: true, ports: [8000] })
      assert.deepEqual(info.network, { internet: true, allowOut: [], denyOut: [], ports: [8000] })
      assert.ok(sbx.getHost(8000).startsWith(`8000-${sbx.id}.localhost:`))
      assert.ok(sbx.accessToken.startsWith('fbt_'))
    },
    async hibernate_on_timeout() {
      await using sbx = await Sandbox.create({ ...conn, ttlSeconds: 2, onTimeout: 'hibernate' })
      assert.equal(sbx.info.onTimeout, 'hibernate')
      await sbx.files.write('/work/kept.txt', 'kept')
      const deadline = Date.now() + 60_000
      while ((await sbx.getInfo()).state !== 'hibernated') {
        assert.ok(Date.now() < deadline, `not hibernated: ${sbx.info.state}`)
        await new Promise((r) => setTimeout(r, 200))
      }
      assert.equal((await sbx.exec('cat /work/kept.txt')).stdout, 'kept')
      assert.equal((await sbx.getInfo()).state, 'running')
    },
    async hibernate_disk_only() {
      await using sbx = await Sandbox.create(conn)
      await sbx.files.write('/work/kept.txt', 'kept')
      await sbx.exec('sleep 3600', { background: true })
      assert.equal((await sbx.hibernate({ keepMemory: false })).state, 'hibernated')
      assert.equal((await sbx.exec('cat /work/kept.txt')).stdout, 'kept')
      assert.equal((await sbx.exec('pgrep -fx "sleep 3600"')).exitCode, 1)
    },
    async files_watch() {
      await using sbx = await Sandbox.create(conn)
      const seen: string[] = []
      const handle = await sbx.files.watch('/work', (c) => void seen.push(`${c.type} ${c.name} ${c.path}`), {
        recursive: true,
      })
      await sbx.files.write('/work/a.txt', 'a')
      await sbx.exec('mkdir /work/sub && sleep 0.3 && echo b > /work/sub/b.txt')
      const deadline = Date.now() + 10_000
      while (!seen.includes('create sub/b.txt /work/sub/b.txt') || !seen.includes('create a.txt /work/a.txt')) {
        assert.ok(Date.now() < deadline, `saw ${JSON.stringify(seen)}`)
        await new Promise((r) => setTimeout(r, 100))
      }
      await handle.stop()
      const count = seen.length
      await sbx.files.write('/work/late.txt', 'x')
      await new Promise((r) => setTimeout(r, 300))
      assert.equal(seen.length, count)
    },
    async named_snapshot() {
      await using sbx = await Sandbox.create(conn)
      await sbx.files.write('/work/kept.txt', 'kept')
      const name = `conf-ts-${Date.now()}`
      const snap = await sbx.snapshot({ name })
      const snapshots = new ForkboxClient(conn).snapshots
      try {
        assert.equal(snap.name, name)
        assert.deepEqual(
          (await snapshots.list({ name })).map((s) => s.id),
          [snap.id],
        )
        await using child = await Sandbox.create({ ...conn, snapshot: name })
        assert.equal((await child.exec('cat /work/kept.txt')).stdout, 'kept')
      } finally {
        await snapshots.delete(snap.id)
      }
    },
    async signed_urls() {
      await using sbx = await Sandbox.create(conn)
      assert.equal(
        (await fetch(await sbx.files.uploadUrl('/work/u.txt'), { method: 'PUT', body: 'via url' })).status,
        200,
      )
      const got = await fetch(await sbx.files.downloadUrl('/work/u.txt', { expiresInSeconds: 60 }))
      assert.equal(await got.text(), 'via url')
    },
    async kill_on_exit() {
      let id = ''
      {
        await using sbx = await Sandbox.create(conn)
        id = sbx.id
      }
      assert.equal((await Sandbox.connect(id, conn)).info.state, 'killed')
    },
  }
  for (const [name, fn] of Object.entries(behaviours)) {
    try {
      await fn()
      results[name] = { ok: true }
    } catch (err) {
      results[name] = { ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }
    }
  }
  await ci?.kill()
  return results
}
