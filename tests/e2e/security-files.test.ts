// File operations are safe end to end (issue 13, findings 3 and 7) on real runsc: downloads are
// pulled and cancellable, sizes are hard stops, only regular files are read, uploads cannot be
// redirected through planted symlinks, and every file op runs with its user's credentials.
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()

function url(path: string): string {
  return `${host().conn.url}${path}`
}

const auth = () => ({ authorization: `Bearer ${host().conn.apiKey}` })

function filesUrl(sbx: Sandbox, path: string, user?: string): string {
  const q = new URLSearchParams({ path, ...(user ? { user } : {}) })
  return url(`/v1/sandboxes/${sbx.id}/files?${q}`)
}

/** For assert.rejects: the error carries forkbox code `code`. */
function withCode(code: string) {
  return (e: unknown) => {
    assert.equal((e as { code?: string }).code, code, String(e))
    return true
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function root(sbx: Sandbox, cmd: string): Promise<string> {
  const r = await sbx.exec(cmd, { user: 'root', timeoutSeconds: 120 })
  assert.equal(r.exitCode, 0, r.stderr)
  return r.stdout
}

/** Descriptors the guest daemon (PID 1) holds open. */
async function guestFds(sbx: Sandbox): Promise<number> {
  return Number((await root(sbx, 'ls /proc/1/fd | wc -l')).trim())
}

/** The server still answers, and the sandbox runs commands and round-trips a file. */
async function stillWorking(sbx: Sandbox): Promise<void> {
  const res = await fetch(url(`/v1/sandboxes/${sbx.id}`), { headers: auth() })
  assert.equal(res.status, 200)
  assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  await sbx.files.write('/tmp/check.txt', 'round trip')
  assert.equal(await sbx.files.read('/tmp/check.txt'), 'round trip')
}

describe('file downloads', () => {
  it("a client that cuts a download after 1 MB leaves the server up, the sandbox working and the guest's file closed", async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.exec('head -c 64000000 /dev/zero > /tmp/big.bin')
    const before = await guestFds(sbx)
    for (let i = 0; i < 3; i++) {
      const ctl = new AbortController()
      const res = await fetch(filesUrl(sbx, '/tmp/big.bin'), { headers: auth(), signal: ctl.signal })
      assert.equal(res.status, 200)
      assert.equal(res.headers.get('content-length'), '64000000')
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      let got = 0
      while (got < 1 << 20) {
        const { value, done } = await reader.read()
        if (done) break
        got += value.length
      }
      assert.ok(got >= 1 << 20)
      ctl.abort()
      await reader.cancel().catch(() => {})
    }
    // the cancel reaches the guest, which stops reading and closes the file
    await waitFor('the guest to close the files it was reading', async () => (await guestFds(sbx)) === before)
    await stillWorking(sbx)
    assert.equal((await sbx.files.read('/tmp/big.bin', { format: 'bytes' })).length, 64_000_000)
  })

  it('a file read with a slow consumer holds only a window in the server', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const size = 100_000_000
    await sbx.exec(`head -c ${size} /dev/zero > /tmp/slow.bin`)
    const baseline = process.memoryUsage().rss
    let peak = baseline
    const res = await fetch(filesUrl(sbx, '/tmp/slow.bin'), { headers: auth() })
    assert.equal(res.status, 200)
    let bytes = 0
    let nextPause = 1 << 20
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      const chunk = r.value
      bytes += chunk.length
      if (bytes >= nextPause) {
        nextPause += 1 << 20
        peak = Math.max(peak, process.memoryUsage().rss)
        await new Promise((r) => setTimeout(r, 20))
      }
    }
    assert.equal(bytes, size)
    // server and client share this process: growth well under the file's size means no one buffered it
    const growthMB = (peak - baseline) / 1e6
    assert.ok(growthMB < 60, `RSS grew by ${growthMB.toFixed(0)} MB while a slow client read 100 MB`)
    await root(sbx, 'rm /tmp/slow.bin')
  })

  it('a file that grows while it is read stops at the size declared in Content-Length', async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.exec('head -c 20000000 /dev/zero > /tmp/grow.bin')
    // appends ~20 MB more over a few seconds, then stops by itself
    await sbx.exec(
      'setsid sh -c "for i in \\$(seq 1 200); do head -c 100000 /dev/zero >> /tmp/grow.bin; sleep 0.02; done" > /dev/null 2>&1 < /dev/null &',
    )
    for (let i = 0; i < 3; i++) {
      const res = await fetch(filesUrl(sbx, '/tmp/grow.bin'), { headers: auth() })
      assert.equal(res.status, 200)
      const declared = Number(res.headers.get('content-length'))
      assert.ok(declared >= 20_000_000)
      const body = new Uint8Array(await res.arrayBuffer())
      assert.equal(body.length, declared)
    }
    await stillWorking(sbx)
  })

  it('/proc/self/smaps (size 0 in procfs) reads twice, chunked without a wrong Content-Length', async () => {
    await using sbx = await Sandbox.create(host().conn)
    for (let i = 0; i < 2; i++) {
      const res = await fetch(filesUrl(sbx, '/proc/self/smaps', 'root'), { headers: auth() })
      assert.equal(res.status, 200)
      assert.equal(res.headers.get('content-length'), null)
      const text = await res.text()
      assert.match(text, /^Size:/m)
    }
    assert.match(await sbx.files.read('/proc/self/status'), /^Name:/m)
    assert.match(await sbx.files.read('/proc/meminfo'), /^MemTotal:/m)
    await stillWorking(sbx)
  })

  it('devices are refused at once with NOT_A_REGULAR_FILE, and the server does not grow', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const baseline = process.memoryUsage().rss
    const started = performance.now()
    for (const path of ['/dev/zero', '/dev/urandom', '/dev/null'])
      for (const user of [undefined, 'root'])
        await assert.rejects(sbx.files.read(path, { user }), withCode('NOT_A_REGULAR_FILE'))
    const res = await fetch(filesUrl(sbx, '/dev/zero', 'root'), { headers: auth() })
    assert.equal(res.status, 409)
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'NOT_A_REGULAR_FILE')
    const ms = performance.now() - started
    assert.ok(ms < 3000, `refusing 7 device reads took ${ms.toFixed(0)} ms`)
    const growthMB = (process.memoryUsage().rss - baseline) / 1e6
    assert.ok(growthMB < 30, `RSS grew by ${growthMB.toFixed(0)} MB`)
    await stillWorking(sbx)
  })

  it("FIFOs and links to the guest's own channel (/proc/1/fd/0, /proc/1/fd/1) are refused, never read", async () => {
    await using sbx = await Sandbox.create(host().conn)
    await root(sbx, 'mkfifo -m 666 /tmp/fifo && ln -s /proc/1/fd/0 /tmp/in && ln -s /proc/1/fd/1 /tmp/out')
    const started = performance.now()
    for (const [path, user] of [
      ['/tmp/fifo', undefined],
      ['/tmp/fifo', 'root'],
      ['/tmp/in', 'root'],
      ['/tmp/out', 'root'],
      ['/proc/1/fd/0', 'root'],
      ['/proc/1/fd/1', 'root'],
    ])
      await assert.rejects(sbx.files.read(path as string, { user }), withCode('NOT_A_REGULAR_FILE'))
    // as `user`, refused too (PID 1's descriptors cannot even be opened)
    for (const path of ['/tmp/in', '/tmp/out'])
      await assert.rejects(sbx.files.read(path, { user: 'user' }), (e: unknown) => {
        assert.ok(['NOT_A_REGULAR_FILE', 'PERMISSION_DENIED'].includes((e as { code: string }).code), String(e))
        return true
      })
    assert.ok(performance.now() - started < 5000)
    // the channel is intact: many requests at once all get their own answers
    const stats = await Promise.all(Array.from({ length: 20 }, () => sbx.files.stat('/tmp/fifo')))
    assert.ok(stats.every((s) => s.type === 'other'))
    await stillWorking(sbx)
  })
})

describe('file uploads', () => {
  it('symlinks planted at temp-file names cannot redirect an upload of the owner or of root', async () => {
    await using sbx = await Sandbox.create(host().conn)
    // a file that a root login shell runs, which only root may change
    await root(sbx, "printf 'original\\n' > /etc/profile.d/zz.sh && chmod 644 /etc/profile.d/zz.sh")
    // as `user`: symlinks at every name the old scheme (.forkbox-upload-<pid>-<channel>) could
    // pick, to that file and to one that does not exist yet; and the target itself as a symlink
    const plant = `
import os
for d in ('/home/user', '/tmp'):
    for ch in range(1, 3000):
        os.symlink('/etc/profile.d/zz.sh' if ch % 2 else '/etc/profile.d/new.sh', f'{d}/.forkbox-upload-1-{ch}')
os.symlink('/etc/profile.d/zz.sh', '/home/user/target.sh')
`
    const planted = await sbx.exec(['python3', '-c', plant], { user: 'user' })
    assert.equal(planted.exitCode, 0, planted.stderr)
    for (let i = 0; i < 5; i++) {
      const mine = await sbx.files.write('/home/user/upload.txt', `payload ${i}\n`)
      assert.equal(mine.uid, 1000)
      const roots = await sbx.files.write('/tmp/upload.txt', `payload ${i}\n`, { user: 'root' })
      assert.equal(roots.uid, 0)
    }
    const replaced = await sbx.files.write('/home/user/target.sh', 'echo pwned\n', { user: 'root' })
    assert.equal(replaced.type, 'file')
    assert.equal(
      await root(sbx, 'cat /etc/profile.d/zz.sh; stat -c %u:%g:%a /etc/profile.d/zz.sh'),
      'original\n0:0:644\n',
    )
    await assert.rejects(sbx.files.stat('/etc/profile.d/new.sh', { user: 'root' }), withCode('FILE_NOT_FOUND'))
    assert.equal(await sbx.files.read('/home/user/upload.txt'), 'payload 4\n')
    assert.equal(await sbx.files.read('/tmp/upload.txt'), 'payload 4\n')
    // no temp file of ours is left behind
    assert.equal(await root(sbx, 'ls -a /home/user /tmp | grep -cE "^\\.forkbox-upload-[0-9a-f]{16}$" || true'), '0\n')
  })

  it('a client that disconnects mid-upload leaves no temp file and the target untouched', async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.files.write('/home/user/cut.bin', 'before')
    const target = new URL(filesUrl(sbx, '/home/user/cut.bin'))
    const req = request(target, {
      method: 'PUT',
      headers: { ...auth(), 'content-type': 'application/octet-stream', 'content-length': String(50 << 20) },
    })
    req.on('error', () => {})
    const temps = async () =>
      (await sbx.files.list('/home/user')).filter((e) => e.name.startsWith('.forkbox-upload-')).length
    for (let i = 0; i < 8; i++) req.write(Buffer.alloc(256 * 1024))
    // the upload is under way in the guest: its temp file exists
    await waitFor('the upload to reach the guest', async () => (await temps()) === 1)
    req.destroy()
    await waitFor('the temp file to go', async () => (await temps()) === 0)
    assert.equal(await sbx.files.read('/home/user/cut.bin'), 'before')
    await stillWorking(sbx)
  })
})

describe('file operations run as their user', () => {
  it("with user 'user' (and by default) /etc/shadow is unreadable and /etc unwritable; root may", async () => {
    await using sbx = await Sandbox.create(host().conn)
    for (const user of ['user', undefined]) {
      await assert.rejects(sbx.files.read('/etc/shadow', { user }), withCode('PERMISSION_DENIED'))
      await assert.rejects(sbx.files.write('/etc/forkbox-evil', 'x', { user }), withCode('PERMISSION_DENIED'))
      await assert.rejects(sbx.files.write('/etc/passwd', 'x', { user }), withCode('PERMISSION_DENIED'))
      await assert.rejects(sbx.files.makeDir('/etc/forkbox-evil.d', { user }), withCode('PERMISSION_DENIED'))
      await assert.rejects(sbx.files.remove('/etc/hostname', { user }), withCode('PERMISSION_DENIED'))
      await assert.rejects(
        sbx.files.rename('/etc/hostname', '/etc/hostname.moved', { user }),
        withCode('PERMISSION_DENIED'),
      )
      await assert.rejects(sbx.files.list('/root', { user }), withCode('PERMISSION_DENIED'))
    }
    const res = await fetch(filesUrl(sbx, '/etc/shadow', 'user'), { headers: auth() })
    assert.equal(res.status, 403)
    // nothing changed in /etc
    assert.equal(await root(sbx, 'ls /etc | grep -c forkbox-evil || true'), '0\n')
    assert.match(await root(sbx, 'head -c 5 /etc/passwd'), /^root:/)
    assert.equal(await root(sbx, 'test -f /etc/hostname && echo yes'), 'yes\n')
    // root may; what each creates is its own
    assert.match(await sbx.files.read('/etc/shadow', { user: 'root' }), /^root:/)
    assert.equal((await sbx.files.write('/etc/forkbox-ok', 'x', { user: 'root' })).uid, 0)
    assert.equal((await sbx.files.write('/home/user/mine/a.txt', 'x')).uid, 1000)
    assert.equal((await sbx.files.stat('/home/user/mine')).uid, 1000)
    assert.equal((await sbx.files.makeDir('/tmp/as-user', { user: 'user' })).uid, 1000)
    await assert.rejects(sbx.files.read('/etc/hostname', { user: 'nosuchuser' }), withCode('VALIDATION_FAILED'))
  })

  it("the guest's threads acting as `user` are out of reach of the sandbox's processes", async () => {
    await using sbx = await Sandbox.create(host().conn)
    await sbx.files.stat('/home/user', { user: 'user' })
    // a file worker holds the user's effective ids (Uid: real effective saved fs = 0 1000 0 1000);
    // user commands run in their own PID namespace, where no thread of the guest is to be seen
    const seen = await root(
      sbx,
      'grep -lE "^Uid:\\s+0\\s+1000\\s+0\\s+1000" /proc/[0-9]*/task/*/status 2>/dev/null || true',
    )
    assert.equal(seen, '')
    await stillWorking(sbx)
  })

  it('a listing too big for one answer gets a clear error and the sandbox keeps working', async () => {
    await using sbx = await Sandbox.create(host().conn)
    // 40k entries with 200-character names: ~20 MB of listing, over the 16 MiB frame limit
    const make = `
import os
os.mkdir('/tmp/huge')
for i in range(40000):
    os.close(os.open(f'/tmp/huge/{i:06d}' + 'x' * 194, os.O_CREAT | os.O_WRONLY, 0o644))
`
    const made = await sbx.exec(['python3', '-c', make], { timeoutSeconds: 300 })
    assert.equal(made.exitCode, 0, made.stderr)
    const started = performance.now()
    await assert.rejects(sbx.files.list('/tmp/huge'), withCode('RESOURCE_LIMIT_EXCEEDED'))
    await assert.rejects(sbx.files.list('/tmp', { depth: 2 }), withCode('RESOURCE_LIMIT_EXCEEDED'))
    const ms = performance.now() - started
    assert.ok(ms < 60_000, `refusing the listings took ${ms.toFixed(0)} ms`)
    const tmp = await sbx.files.list('/tmp')
    assert.ok(tmp.some((e) => e.name === 'huge' && e.type === 'dir'))
    await stillWorking(sbx)
  })
})
