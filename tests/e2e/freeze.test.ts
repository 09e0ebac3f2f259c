// Idle sandboxes frozen through their freezer cgroup on real runsc: no CPU while idle, and every
// kind of call thaws them first, invisibly but for its latency.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ForkboxClient, Sandbox } from '@forkbox/sdk'
import { containerOf, until, useTestHost } from './harness.ts'

const host = useTestHost({ options: () => ({ freezeAfterSeconds: 1 }) })

/** The sandbox's runsc container (a claimed pool sandbox keeps its pool name). */
function containerName(id: string): string {
  const name = containerOf(host().dataDir, id)
  if (!name) throw new Error(`no bundle of ${id}`)
  return name
}

const cgroupFile = (id: string, controller: string, file: string) =>
  join('/sys/fs/cgroup', controller, host().cgroupParent, containerName(id), file)
const frozen = (id: string) => readFileSync(cgroupFile(id, 'freezer', 'freezer.state'), 'utf8').trim() === 'FROZEN'
const cpuNs = (id: string) => Number(readFileSync(cgroupFile(id, 'cpuacct', 'cpuacct.usage'), 'utf8'))

describe('freezing idle sandboxes', () => {
  it('an idle sandbox is frozen (no CPU at all); exec, files, a proxied request, fork, runCode, a terminal, snapshot and hibernate each thaw it', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { ports: [8000] } })
    await sbx.exec('cd /tmp && echo served > index.html && setsid python3 -m http.server 8000 >/dev/null 2>&1 &')
    await until(
      'the server to listen',
      async () =>
        (await sbx.exec('python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000), 1)"')).exitCode ===
        0,
    )
    // a server that only listens is idle
    await until('the sandbox to freeze', () => frozen(sbx.id))
    const before = cpuNs(sbx.id)
    await new Promise((r) => setTimeout(r, 3000))
    assert.equal(cpuNs(sbx.id) - before, 0, 'a frozen sandbox uses no CPU')
    assert.ok(frozen(sbx.id))

    let started = performance.now()
    assert.equal((await sbx.exec('echo thawed')).stdout, 'thawed\n')
    console.log(`exec on a frozen sandbox: ${(performance.now() - started).toFixed(0)} ms`)

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    assert.equal(await sbx.files.read('/tmp/index.html'), 'served\n')

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    started = performance.now()
    const res = await fetch(`http://${sbx.getHost(8000)}/index.html`, { headers: { 'x-api-key': host().conn.apiKey } })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'served\n')
    console.log(`proxied request to a frozen sandbox: ${(performance.now() - started).toFixed(0)} ms`)

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    const [child] = await sbx.fork({ count: 1 })
    assert.ok(child)
    try {
      assert.equal(await child.files.read('/tmp/index.html'), 'served\n')
    } finally {
      await child.kill()
    }

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    const cell = await sbx.runCode('6 * 7')
    assert.equal(cell.text, '42', JSON.stringify(cell.error))

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    let typed = ''
    const term = await sbx.pty.create({
      cols: 80,
      rows: 24,
      onData: (d) => {
        typed += Buffer.from(d).toString()
      },
    })
    term.sendInput('echo $((6 * 7))x\n')
    await until('the terminal to answer', () => typed.includes('42x'))
    term.kill()
    await term.wait().catch(() => {})

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    const snap = await sbx.snapshot()
    try {
      await using fromSnap = await Sandbox.create({ ...host().conn, snapshot: snap.id })
      assert.equal((await fromSnap.exec('cat /tmp/index.html')).stdout, 'served\n')
    } finally {
      await new ForkboxClient(host().conn).snapshots.delete(snap.id)
    }

    await until('the sandbox to freeze again', () => frozen(sbx.id))
    await sbx.hibernate()
    assert.equal((await sbx.exec('cat /tmp/index.html')).stdout, 'served\n')
    const types = (
      (await await fetch(`${host().conn.url}/v1/sandboxes/${sbx.id}/events`, {
        headers: { authorization: `Bearer ${host().conn.apiKey}` },
      }).then((r) => r.json())) as { events: { type: string }[] }
    ).events.map((e) => e.type)
    assert.ok(types.includes('frozen') && types.includes('thawed'), types.join(' '))
  })

  it('the warm pool is frozen while it waits; a create claims a frozen sandbox and it answers', async () => {
    const dir = join(host().dataDir, 'sandboxes')
    const pooled = () => readdirSync(dir).filter((n) => n.startsWith('pool-base'))
    const poolFrozen = (name: string) =>
      readFileSync(join('/sys/fs/cgroup/freezer', host().cgroupParent, name, 'freezer.state'), 'utf8').trim() ===
      'FROZEN'
    await until('a frozen pool sandbox', () => pooled().some(poolFrozen), 30_000)
    await using sbx = await Sandbox.create(host().conn)
    assert.equal((await sbx.exec('echo claimed')).stdout, 'claimed\n')
  })

  it('a sandbox that is busy, streams output or has a terminal open is never frozen', async () => {
    await using busy = await Sandbox.create(host().conn)
    await busy.exec('setsid sh -c "while :; do :; done" >/dev/null 2>&1 &')
    await using watched = await Sandbox.create(host().conn)
    const term = await watched.pty.create({ cols: 80, rows: 24, onData: () => {} })
    await using streaming = await Sandbox.create(host().conn)
    // a line a second: hardly any CPU, but a stream is open
    const lines: string[] = []
    const streamed = streaming.exec('for i in 1 2 3 4 5 6 7; do echo $i; sleep 1; done', {
      onStdout: (d) => lines.push(d),
    })
    await new Promise((r) => setTimeout(r, 6000))
    assert.equal(frozen(busy.id), false)
    assert.equal(frozen(watched.id), false)
    assert.equal(frozen(streaming.id), false)
    assert.equal((await streamed).exitCode, 0)
    assert.equal(lines.join(''), '1\n2\n3\n4\n5\n6\n7\n')
    term.kill()
    await until('the closed terminal to let it freeze', () => frozen(watched.id))
  })
})
