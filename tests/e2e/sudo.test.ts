// sudo on real runsc: gVisor ignores set-user-ID bits, so the templates' sudo is served by the
// guest (forkbox_sudo.py asks the daemon, which runs the command as root with the caller's fds).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import { until, useTestHost } from './harness.ts'

const host = useTestHost()

describe('sudo', () => {
  it('runs a command as root (or another user) with its stdin, output, exit status and a reset environment', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const run = async (cmd: string, user?: string) => {
      const r = await sbx.exec(cmd, { user, cwd: user ? '/tmp' : undefined })
      return { out: r.stdout, err: r.stderr, code: r.exitCode }
    }
    assert.deepEqual(await run('id -un; sudo id -u'), { out: 'user\n0\n', err: '', code: 0 })
    assert.deepEqual(await run('echo piped | sudo cat'), { out: 'piped\n', err: '', code: 0 })
    assert.equal((await run("sudo sh -c 'echo to-err >&2; exit 7'")).code, 7)
    assert.equal((await run("sudo sh -c 'echo to-err >&2; exit 7'")).err, 'to-err\n')
    assert.deepEqual(await run('sudo -u nobody id -un'), { out: 'nobody\n', err: '', code: 0 })
    // root can write where the user cannot
    assert.equal((await run('sudo touch /etc/made-by-sudo && stat -c %U /etc/made-by-sudo')).out, 'root\n')
    // env_reset: the caller's variables stay behind unless -E or VAR=value asks for them
    assert.deepEqual(await run('FOO=1 sudo printenv FOO'), { out: '', err: '', code: 1 })
    assert.equal((await run('FOO=1 sudo -E printenv FOO')).out, '1\n')
    assert.equal((await run('sudo BAR=2 printenv BAR')).out, '2\n')
    assert.equal((await run('sudo printenv SUDO_USER HOME USER')).out, 'user\n/root\nroot\n')
    assert.equal((await run('cd /tmp && sudo pwd && sudo -i pwd')).out, '/tmp\n/root\n')
    assert.match((await run('sudo -l')).out, /User user may run the following commands.*\n.*NOPASSWD: ALL/)
    // refusals: sudo's words, exit 1
    assert.deepEqual(await run('sudo no-such-command'), {
      out: '',
      err: 'sudo: no-such-command: command not found\n',
      code: 1,
    })
    assert.deepEqual(await run('cd /tmp && sudo id', 'nobody'), {
      out: '',
      err: 'sudo: nobody is not in the sudoers file.\n',
      code: 1,
    })
    assert.equal((await run('sudo -Z id')).code, 1)
  })

  it('signals reach the command; a killed sudo takes its command with it', async () => {
    await using sbx = await Sandbox.create(host().conn)
    // timeout(1) sends TERM to sudo, which sends it on: the command dies of it, and so does sudo
    const started = Date.now()
    const r = await sbx.exec('timeout -s TERM 1 sudo sleep 100; echo "status=$?"')
    assert.equal(r.stdout, 'status=124\n')
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`)
    // killed with SIGKILL (nothing to send on), its command goes too
    const proc = await sbx.exec('sudo sleep 4242', { background: true })
    // (the namespace's init sleeps as root too: this one is found by its argument)
    const sleeping = async () => (await sbx.exec('pgrep -u root -f "^sleep 4242$"')).exitCode === 0
    await until('the root sleep', sleeping)
    await proc.kill('SIGKILL')
    await until('the root sleep to end', async () => !(await sleeping()))
  })

  it('on a terminal: sudo -i is a root login shell with job control, and ^C reaches its command', async () => {
    await using sbx = await Sandbox.create(host().conn)
    let text = ''
    const decoder = new TextDecoder()
    const term = await sbx.pty.create({
      cols: 90,
      rows: 30,
      onData: (d) => {
        text += decoder.decode(d, { stream: true })
      },
    })
    const see = async (pattern: RegExp, from: number) =>
      until(`${pattern} on the terminal`, async () => pattern.test(text.slice(from)))
    let mark = text.length
    term.sendInput('sudo -i\n')
    term.sendInput('echo "who=$(id -u) cols=$(tput cols) tty=$(tty)"\n')
    await see(/who=0 cols=90 tty=\/dev\/pts\/\d+/, mark)
    mark = text.length
    term.sendInput('sleep 100\n')
    await new Promise((r) => setTimeout(r, 800))
    term.sendInput('\x03')
    term.sendInput('echo "status=$?"\n')
    await see(/status=130/, mark)
    mark = text.length
    term.sendInput('exit 3\n')
    // (what is typed before it is gone went to its terminal, as with sudo's own)
    await see(/logout[\s\S]*user@sbx-/, mark)
    mark = text.length
    term.sendInput('echo "back=$? as $(id -un)"\n')
    await see(/back=3 as user/, mark)
    term.sendInput('exit\n')
    assert.equal((await term.wait()).exitCode, 0)
  })
})
