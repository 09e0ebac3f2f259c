// The seed loop and the core exec/files behaviour, on real runsc sandboxes.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { ForkboxClient, NotFoundError, Sandbox, TimeoutError } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')

describe('sandbox basics', () => {
  it('runs the seed loop: write a cell, run it with a timeout, read its output back as bytes', async () => {
    const sbx = await Sandbox.create({ ...host().conn, template: 'base', ttlSeconds: 120 })
    try {
      assert.equal(sbx.info.state, 'running')
      const cell = [
        'import json, statistics',
        'xs = [3, 1, 4, 1, 5, 9, 2, 6]',
        "open('/work/out.bin', 'wb').write(bytes(range(256)))",
        "print(json.dumps({'mean': statistics.mean(xs), 'n': len(xs)}))",
      ].join('\n')
      await sbx.files.write('/work/cell.py', cell)
      const r = await sbx.exec(['python3', '/work/cell.py'], { timeoutSeconds: 30 })
      assert.equal(r.exitCode, 0, r.stderr)
      assert.deepEqual(JSON.parse(r.stdout), { mean: 3.875, n: 8 })
      const bytes = await sbx.files.read('/work/out.bin', { format: 'bytes' })
      assert.deepEqual(Buffer.from(bytes), Buffer.from(Array.from({ length: 256 }, (_, i) => i)))
    } finally {
      await sbx.kill()
    }
    const info = await Sandbox.connect(sbx.id, host().conn).then((s) => s.getInfo())
    assert.equal(info.state, 'killed')
  })

  it('kills a command at its timeout, reports it, and the sandbox lives on', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    const started = Date.now()
    await assert.rejects(sbx.exec('echo before; sleep 30; echo after', { timeoutSeconds: 1 }), (err: unknown) => {
      assert.ok(err instanceof TimeoutError, String(err))
      assert.equal(err.code, 'EXEC_TIMEOUT')
      assert.equal((err.details as { stdout: string }).stdout, 'before\n')
      return true
    })
    assert.ok(Date.now() - started < 10_000)
    assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  })

  it('reports non-zero exits, stderr, env, cwd, user and stdin', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, envs: { GREETING: 'hello' } })
    const fail = await sbx.exec('echo oops >&2; exit 3')
    assert.equal(fail.exitCode, 3)
    assert.equal(fail.stderr, 'oops\n')
    const env = await sbx.exec('echo "$GREETING $EXTRA"; pwd; id -un', { env: { EXTRA: 'world' }, cwd: '/tmp' })
    assert.equal(env.stdout, 'hello world\n/tmp\nuser\n')
    assert.equal((await sbx.exec(['id', '-u'], { user: 'root' })).stdout, '0\n')
    const rev = await sbx.exec(['python3', '-c', 'print(input()[::-1])'], { stdin: 'forkbox\n' })
    assert.equal(rev.stdout, 'xobkrof\n')
    const missing = await sbx.exec(['definitely-not-a-command']).catch((e: unknown) => e)
    assert.equal((missing as { code?: string }).code, 'EXEC_FAILED')
  })

  it('round-trips a 20 MB binary file byte for byte', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    const data = randomBytes(20 * 1024 * 1024)
    const entry = await sbx.files.write('/work/data/blob.bin', data)
    assert.equal(entry.size, data.length)
    const sum = await sbx.exec(['sha256sum', '/work/data/blob.bin'])
    assert.equal(sum.stdout.split(' ')[0], createHash('sha256').update(data).digest('hex'))
    const back = await sbx.files.read('/work/data/blob.bin', { format: 'bytes' })
    assert.equal(back.length, data.length)
    assert.ok(Buffer.from(back).equals(data))
  })

  it('caps 50 MB of stdout instead of buffering it', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    const before = process.memoryUsage().rss
    const r = await sbx.exec('head -c 50000000 /dev/zero | tr "\\0" x; echo done >&2', {
      maxOutputBytes: 1024 * 1024,
      timeoutSeconds: 60,
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.truncated, true)
    assert.equal(r.stdout.length, 1024 * 1024)
    assert.equal(r.stderr, 'done\n')
    assert.ok(process.memoryUsage().rss - before < 40 * 1024 * 1024, 'server memory grew with the stream')
    assert.equal((await sbx.exec(['echo', 'ok'])).stdout, 'ok\n')
  })

  it('sandboxes started from one baked snapshot share no randomness', async () => {
    const boxes = await Promise.all([1, 2, 3].map(() => Sandbox.create({ ...host().conn })))
    try {
      const outs = await Promise.all(
        boxes.map((b) => b.exec(['python3', '-c', 'import random, uuid; print(random.random(), uuid.uuid4())'])),
      )
      const lines = outs.map((o) => o.stdout.trim())
      assert.equal(new Set(lines).size, 3, lines.join('\n'))
    } finally {
      await Promise.all(boxes.map((b) => b.kill()))
    }
  })

  it('each sandbox has its own hostname (its id), machine id and boot id: created, forked, woken', async () => {
    const identity = async (b: Sandbox) => {
      const r = await b.exec(
        'hostname; cat /etc/machine-id /proc/sys/kernel/random/boot_id; getent hosts "$(hostname)" | cut -f1 -d" "',
      )
      const [hostname, machineId, bootId, resolved] = r.stdout.trim().split('\n')
      return { hostname, machineId, bootId, resolved }
    }
    const a = await Sandbox.create({ ...host().conn })
    const b = await Sandbox.create({ ...host().conn })
    try {
      const forks = await a.fork({ count: 2 })
      const all = [a, b, ...forks]
      const ids = await Promise.all(all.map(identity))
      ids.forEach((id, i) => {
        assert.equal(id.hostname, all[i]?.id)
        assert.match(id.machineId ?? '', /^[0-9a-f]{32}$/)
        assert.match(id.bootId ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        // its own name resolves without a resolver
        assert.equal(id.resolved, '127.0.1.1')
      })
      for (const key of ['hostname', 'machineId', 'bootId'] as const)
        assert.equal(new Set(ids.map((id) => id[key])).size, 4, `${key}: ${ids.map((id) => id[key]).join(' ')}`)
      // a woken sandbox is the same machine
      await b.hibernate()
      assert.deepEqual(await identity(b), ids[1])
      await Promise.all(forks.map((f) => f.kill()))
    } finally {
      await Promise.all([a.kill(), b.kill()])
    }
  })

  it('kills what a command leaves in its process group, but not what it detached with setsid', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    await sbx.exec('sleep 300 & setsid sleep 301 > /dev/null 2>&1 &')
    await new Promise((r) => setTimeout(r, 500))
    const ps = await sbx.exec(['ps', '-eo', 'args='])
    assert.ok(!ps.stdout.includes('sleep 300'), ps.stdout)
    assert.ok(ps.stdout.includes('sleep 301'), ps.stdout)
  })

  it('reaps orphans: no zombies pile up in the sandbox', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    // each subshell's child is orphaned to PID 1 (the guest daemon) when the subshell exits
    await sbx.exec('for i in $(seq 20); do (sleep 0.1 &); done; sleep 1')
    const ps = await sbx.exec(['ps', '-eo', 'stat=,args='])
    assert.equal(ps.stdout.split('\n').filter((l) => l.trim().startsWith('Z')).length, 0, ps.stdout)
  })

  it('files: list, stat, mkdir, rename, remove, exists', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    await sbx.files.makeDir('/work/a/b/c')
    await sbx.files.write('/work/a/b/c/note.txt', 'hi')
    await sbx.files.write('notes/rel.txt', 'relative to home')
    assert.equal(await sbx.files.read('/home/user/notes/rel.txt'), 'relative to home')
    const listed = await sbx.files.list('/work/a', { depth: 3 })
    assert.deepEqual(
      listed.map((e) => `${e.type}:${e.path}`),
      ['dir:/work/a/b', 'dir:/work/a/b/c', 'file:/work/a/b/c/note.txt'],
    )
    const st = await sbx.files.stat('/work/a/b/c/note.txt')
    assert.equal(st.size, 2)
    assert.equal(st.uid, 1000)
    await sbx.files.rename('/work/a/b/c/note.txt', '/work/moved/note.txt')
    assert.equal(await sbx.files.exists('/work/a/b/c/note.txt'), false)
    assert.equal(await sbx.files.read('/work/moved/note.txt'), 'hi')
    await sbx.files.remove('/work/a')
    assert.equal(await sbx.files.exists('/work/a'), false)
    await assert.rejects(
      sbx.files.read('/work/nope.txt'),
      (e: unknown) => e instanceof NotFoundError && e.code === 'FILE_NOT_FOUND',
    )
  })

  it('signed URLs: a plain PUT and GET with no key write and read one file; the URL works for nothing else and expires', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const data = randomBytes(3 * 1024 * 1024)
    const up = await sbx.files.uploadUrl('/work/signed.bin')
    assert.ok(!up.includes(host().conn.apiKey as string), 'the key is in the URL')
    const put = await fetch(up, { method: 'PUT', body: data })
    assert.equal(put.status, 200)
    const down = await sbx.files.downloadUrl('/work/signed.bin', { expiresInSeconds: 2 })
    const got = await fetch(down, { headers: { origin: 'http://elsewhere.example' } })
    assert.equal(got.status, 200)
    assert.equal(got.headers.get('access-control-allow-origin'), '*')
    assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(data))
    // the download URL does not write, nor read another file
    assert.equal((await fetch(down, { method: 'PUT', body: 'x' })).status, 401)
    assert.equal((await fetch(down.replace('signed.bin', 'other.bin'))).status, 401)
    await new Promise((r) => setTimeout(r, 3000))
    const late = await fetch(down)
    assert.equal(late.status, 401)
    assert.equal(((await late.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED')
  })

  it('file metadata: kept with the file, returned by stat and (asked) list, replaced by the next write', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const e = await sbx.files.write('/work/m.txt', 'x', { metadata: { owner: 'agent-7', stage: 'draft' } })
    assert.deepEqual(e.metadata, { owner: 'agent-7', stage: 'draft' })
    assert.deepEqual((await sbx.files.stat('/work/m.txt')).metadata, { owner: 'agent-7', stage: 'draft' })
    assert.equal((await sbx.files.list('/work')).find((f) => f.name === 'm.txt')?.metadata, undefined)
    const listed = await sbx.files.list('/work', { metadata: true })
    assert.deepEqual(listed.find((f) => f.name === 'm.txt')?.metadata, { owner: 'agent-7', stage: 'draft' })
    await sbx.files.write('/work/m.txt', 'y', { metadata: { stage: 'final' } })
    assert.deepEqual((await sbx.files.stat('/work/m.txt')).metadata, { stage: 'final' })
    await assert.rejects(
      sbx.files.write('/work/m.txt', 'z', { metadata: { 'bad key': 'v' } }),
      (err: unknown) => err instanceof Error && /metadata|header/i.test(err.message),
    )
  })

  it('keeps two sandboxes apart', async () => {
    await using a = await Sandbox.create({ ...host().conn })
    await using b = await Sandbox.create({ ...host().conn })
    await a.files.write('/work/secret.txt', 'only in a')
    await a.exec('echo tmp-a > /tmp/x')
    assert.equal(await b.files.exists('/work/secret.txt'), false)
    assert.equal((await b.exec('cat /tmp/x 2>/dev/null || echo none')).stdout, 'none\n')
    const ps = await b.exec(['ps', '-eo', 'args'])
    assert.ok(!ps.stdout.includes('tmp-a'))
  })

  it('a key sees and touches only its own sandboxes', async () => {
    const admin = new ForkboxClient(host().conn)
    const other = await admin.keys.create('other-tenant')
    const mine = await Sandbox.create({ ...host().conn, metadata: { owner: 'admin' } })
    try {
      const theirs = { url: host().conn.url, apiKey: other.key }
      await assert.rejects(Sandbox.connect(mine.id, theirs), NotFoundError)
      await assert.rejects(Sandbox.kill(mine.id, theirs), NotFoundError)
      assert.deepEqual(await Sandbox.list(theirs), [])
      const listed = await Sandbox.list({ ...host().conn, metadata: { owner: 'admin' } })
      assert.ok(listed.some((s) => s.id === mine.id))
      assert.equal((await mine.exec(['true'])).exitCode, 0)
    } finally {
      await mine.kill()
    }
  })

  it('expires a sandbox at its TTL and extends it with setTimeout', async () => {
    const short = await Sandbox.create({ ...host().conn, ttlSeconds: 2 })
    const extended = await Sandbox.create({ ...host().conn, ttlSeconds: 2 })
    await extended.setTimeout(60)
    await new Promise((r) => setTimeout(r, 3500))
    assert.equal((await short.getInfo()).state, 'killed')
    assert.equal((await extended.getInfo()).state, 'running')
    await extended.kill()
  })
})
