// The guest daemon's channel is out of reach of code in the sandbox, root included (issue 13,
// finding 4): what users run lives in its own PID and mount namespaces, where PID 1 is a reaper
// and the daemon has no pid, so /proc/1/fd, forged frames, SIGUSR2 and a /proc scan all miss it;
// through exec, code cells, terminals, forks and hibernation. And bad spawn input (finding 12)
// gets VALIDATION_FAILED at once, never a request that hangs.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type PtyHandle, Sandbox } from '@forkbox/sdk'
import WebSocket from 'ws'
import { useTestHost } from './harness.ts'

const host = useTestHost()

// Everything root in a sandbox could try on the guest: its fds under /proc/1 (and every other
// pid's), forged frames faking exec results on the first 400 channels, SIGUSR2 to PID 1, a scan of
// /proc for the daemon. What it saw lands in /tmp/attack.json.
const ATTACK = String.raw`
import json, os, signal, stat, struct
H = struct.Struct(">IBI")
fake = json.dumps({"type": "exit", "exitCode": 77, "signal": None, "timedOut": False, "truncated": False, "durationMs": 1}).encode()
forged = b"".join(H.pack(len(fake), 1, ch) + fake for ch in range(1, 400))
me, parent = os.getpid(), os.getppid()
report = {"pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(), "pid1Fds": [], "guest": [], "sockets": [], "written": 0, "usr2": None, "uid": os.getuid()}
for fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            report["sockets"].append(["self", fd])
    except OSError:
        pass
for p in sorted(int(x) for x in os.listdir("/proc") if x.isdigit()):
    try:
        cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        continue
    if "forkbox_guest" in cmd or "spawner_main" in cmd:
        report["guest"].append([p, cmd[:80]])
    if p in (me, parent) or (os.environ.get("ONLY_PID1") and p != 1):
        continue
    try:
        fds = os.listdir(f"/proc/{p}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{p}/fd/{fd}"
        try:
            target = os.readlink(path)
            if p == 1:
                report["pid1Fds"].append(target)
            if target.startswith("socket:"):
                report["sockets"].append([p, fd])
            if stat.S_ISREG(os.stat(path).st_mode) or stat.S_ISDIR(os.stat(path).st_mode):
                continue
            f = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(f, forged)
            report["written"] += 1
        except OSError:
            pass
        finally:
            os.close(f)
try:
    os.kill(1, signal.SIGUSR2)
    report["usr2"] = "delivered to pid 1"
except OSError as e:
    report["usr2"] = e.strerror
json.dump(report, open("/tmp/attack.json", "w"))
`

interface AttackReport {
  pid1: string
  pid1Fds: string[]
  guest: [number, string][]
  sockets: [number | string, string][]
  written: number
  usr2: string
  uid: number
}

/** Runs ATTACK as root; `onlyPid1` writes to PID 1's fds only (not to other user processes'). */
async function attack(sbx: Sandbox, onlyPid1 = false): Promise<AttackReport> {
  await sbx.files.write('/tmp/attack.py', ATTACK)
  const env = onlyPid1 ? { ONLY_PID1: '1' } : undefined
  const r = await sbx.exec(['python3', '/tmp/attack.py'], { user: 'root', env, timeoutSeconds: 60 })
  assert.equal(r.exitCode, 0, r.stderr)
  return JSON.parse((await sbx.exec(['cat', '/tmp/attack.json'])).stdout) as AttackReport
}

/** What the attack must not have found: PID 1 is the reaper (fds all /dev/null), no daemon in /proc. */
function assertMissedTheGuest(report: AttackReport): void {
  assert.equal(report.pid1, 'forkbox-init', JSON.stringify(report))
  assert.ok(
    report.pid1Fds.every((t) => t === '/dev/null'),
    `PID 1 holds only /dev/null: ${report.pid1Fds}`,
  )
  assert.deepEqual(report.guest, [], 'no process of the daemon is visible')
  // nothing users run holds a socket to the daemon or its spawner (through which exits are reported)
  assert.deepEqual(report.sockets, [], 'no process holds a socket')
}

/** The first JSON message a terminal WebSocket answers a `start` with (`started` or `error`). */
function terminalAnswer(
  sbx: Sandbox,
  start: Record<string, unknown>,
): Promise<{ type: string; error?: { code: string } }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${host().conn.url.replace('http', 'ws')}/v1/sandboxes/${sbx.id}/pty`, {
      headers: { authorization: `Bearer ${host().conn.apiKey}` },
    })
    ws.on('open', () => ws.send(JSON.stringify({ type: 'start', ...start })))
    ws.on('message', (data, binary) => {
      if (binary) return
      const msg = JSON.parse(data.toString())
      if (msg.type === 'started') ws.close()
      resolve(msg)
    })
    ws.on('error', reject)
  })
}

describe('the guest out of reach of sandbox code', () => {
  it('as root, /proc/1/fd, forged frames, SIGUSR2 and a /proc scan miss the guest; exec goes on', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    // a command in flight while the attack runs: a forged exit or a forced resync would end it early
    const victim = sbx.exec('sleep 2; echo real; exit 0', { timeoutSeconds: 60 })
    const report = await attack(sbx)
    assert.equal(report.uid, 0)
    assertMissedTheGuest(report)
    const v = await victim
    assert.equal(v.exitCode, 0, 'not the forged exit 77')
    assert.ok(v.stdout.includes('real'), v.stdout)
    assert.ok(v.durationMs >= 1500, `ran its whole course (${v.durationMs} ms)`)

    // SIGUSR2 to every process root may signal reaches none of the daemon's
    const usr2 = await sbx.exec('kill -USR2 -1; echo "sent=$?"', { user: 'root' })
    assert.equal(usr2.stdout, 'sent=0\n')
    assert.equal((await sbx.exec(['echo', 'unmoved'])).stdout, 'unmoved\n')

    // a command starts with its stdio and nothing else
    assert.equal((await sbx.exec('ls /proc/self/fd', { user: 'root' })).stdout, '0\n1\n2\n3\n')

    // inside, pids are the namespace's; the API's pid of the same process is the guest's view
    const bg = await sbx.exec('echo $$ > /tmp/inner.pid; exec sleep 30', { background: true, user: 'root' })
    await new Promise((r) => setTimeout(r, 500))
    const inner = Number((await sbx.exec(['cat', '/tmp/inner.pid'])).stdout)
    assert.ok(inner > 1 && inner !== bg.pid, `inner pid ${inner}, API pid ${bg.pid}`)
    await bg.kill('SIGKILL')
    assert.equal((await bg.wait()).signal, 'SIGKILL')

    // root cannot unmount the namespace's /proc (no CAP_SYS_ADMIN) to see the sandbox's own
    const r = await sbx.exec(
      'umount /proc; echo "umount=$?"; for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done | grep -c "[f]orkbox_guest"',
      { user: 'root' },
    )
    assert.match(r.stdout, /umount=(?!0)\d+/)
    assert.match(r.stdout, /^0$/m)

    // killing the namespace's init ends what runs in it, nothing else: the next exec has a new one
    await sbx.exec('kill -9 1; sleep 5', { user: 'root' }).catch(() => {})
    const after = await sbx.exec('echo ok; tr "\\0" " " < /proc/1/cmdline', { user: 'root' })
    assert.match(after.stdout, /^ok\nforkbox-init /)
    assert.equal((await sbx.getInfo()).state, 'running')
  })

  it('a terminal as root misses the guest too, and keeps working', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    await sbx.files.write('/tmp/attack.py', ATTACK)
    let text = ''
    const decoder = new TextDecoder()
    const term: PtyHandle = await sbx.pty.create({
      user: 'root',
      onData: (d) => {
        text += decoder.decode(d, { stream: true })
      },
    })
    const until = async (pattern: RegExp) => {
      const deadline = Date.now() + 30_000
      while (!pattern.test(text)) {
        if (Date.now() > deadline) throw new Error(`no ${pattern} in:\n${text}`)
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    term.sendInput('python3 /tmp/attack.py; echo "attack=$?"; kill -USR2 1; echo "usr2=$?"\n')
    await until(/attack=0/)
    await until(/usr2=\d/)
    assertMissedTheGuest(JSON.parse((await sbx.exec(['cat', '/tmp/attack.json'])).stdout) as AttackReport)
    term.sendInput('echo "alive-$((40 + 2))"; exit 3\n')
    await until(/alive-42/)
    assert.deepEqual(await term.wait(), { exitCode: 3, signal: null })
    assert.equal((await sbx.exec(['echo', 'still'])).stdout, 'still\n')
  })

  it('forks and a hibernated-then-woken sandbox still isolate', async () => {
    await using parent = await Sandbox.create({ ...host().conn })
    assertMissedTheGuest(await attack(parent))
    const [child] = await parent.fork({ count: 1 })
    assert.ok(child)
    try {
      assertMissedTheGuest(await attack(child))
      assert.equal((await child.exec(['echo', 'fork'])).stdout, 'fork\n')
      await child.hibernate()
      assertMissedTheGuest(await attack(child))
      assert.equal((await child.exec(['echo', 'woken'])).stdout, 'woken\n')
    } finally {
      await child.kill()
    }
  })

  it('code cells (and the shell beside them, as root) miss the guest; cells go on', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: 'code-interpreter', ttlSeconds: 900 })
    const cell = await sbx.runCode(
      [
        'import os, signal, json',
        'seen = {"ppid": os.getppid(), "pid1": open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode()}',
        'seen["guest"] = [p for p in os.listdir("/proc") if p.isdigit() and b"forkbox_guest" in open(f"/proc/{p}/cmdline", "rb").read()]',
        'try:',
        '    open("/proc/1/fd/1", "wb").write(b"forged")',
        '    seen["fd1"] = "written"',
        'except OSError as e:',
        '    seen["fd1"] = e.strerror',
        'try:',
        '    os.kill(1, signal.SIGUSR2)',
        '    seen["usr2"] = "sent"',
        'except OSError as e:',
        '    seen["usr2"] = e.strerror',
        'def link(fd):',
        '    try:',
        '        return os.readlink(f"/proc/self/fd/{fd}")',
        '    except OSError:',
        '        return ""  # the listing\'s own fd, closed by now',
        'fds = [link(fd) for fd in os.listdir("/proc/self/fd")]',
        'seen["sockets"] = [t for t in fds if t.startswith("socket:")]',
        'print(json.dumps(seen))',
      ].join('\n'),
    )
    assert.equal(cell.error, null, JSON.stringify(cell.error))
    const seen = JSON.parse(cell.logs.stdout.join('')) as Record<string, unknown>
    assert.equal(seen.pid1, 'forkbox-init')
    assert.deepEqual(seen.guest, [])
    assert.equal(seen.ppid, 0, 'the kernel has no visible parent')
    assert.deepEqual(seen.sockets, [])
    assert.notEqual(seen.usr2, 'sent', 'the kernel runs as user, not root: PID 1 is not its to signal')
    // root beside the kernel (at PID 1's fds: the kernel's own pipes are root's to spoil), while
    // the kernel keeps its state
    await sbx.runCode('x = 41')
    assertMissedTheGuest(await attack(sbx, true))
    assert.equal((await sbx.runCode('x + 1')).text, '42')
  })
})

describe('bad spawn input is answered at once', () => {
  it('an env name with "=" (or a NUL anywhere) is VALIDATION_FAILED for exec, code and terminals', async () => {
    await using sbx = await Sandbox.create({ ...host().conn })
    const refused = async (p: Promise<unknown>, what: string) => {
      const started = Date.now()
      await assert.rejects(p, (e: unknown) => {
        assert.equal((e as { code?: string }).code, 'VALIDATION_FAILED', `${what}: ${e}`)
        return true
      })
      assert.ok(Date.now() - started < 5000, `${what} answered in ${Date.now() - started} ms`)
    }
    await refused(sbx.exec('true', { env: { 'A=B': 'x' } }), 'env name with =')
    await refused(sbx.exec('true', { env: { A: 'x\0y' } }), 'env value with NUL')
    // the schema takes these; execve does not: the guest answers instead of hanging
    await refused(sbx.exec(['echo', 'a\0b']), 'argv with NUL')
    await refused(sbx.exec('pwd', { cwd: '/tmp\0x' }), 'cwd with NUL')
    await refused(sbx.exec('true', { background: true, env: { 'A=B': 'x' } }), 'background env name with =')

    for (const start of [{ envs: { 'A=B': 'x' } }, { cmd: 'echo a\0b' }]) {
      const t0 = Date.now()
      const answer = await terminalAnswer(sbx, start)
      assert.equal(answer.type, 'error', JSON.stringify(answer))
      assert.equal(answer.error?.code, 'VALIDATION_FAILED', JSON.stringify(answer))
      assert.ok(Date.now() - t0 < 5000)
    }
    // nothing was left holding the sandbox: a terminal and a command still start
    assert.equal((await terminalAnswer(sbx, { cmd: 'true' })).type, 'started')
    assert.equal((await sbx.exec(['echo', 'fine'])).stdout, 'fine\n')
  })
})
