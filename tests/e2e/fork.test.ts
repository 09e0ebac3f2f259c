// Fork and snapshot of a live sandbox: a Python process's memory, files and the running process
// itself carry over; forks are independent of each other and of the original.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ForkboxClient, NotFoundError, Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()

// A long-lived Python process driven through a FIFO: each line is eval'd (or exec'd) in its
// globals and the answer lands in /work/out.txt.
const REPL = `
import os
x = None
while True:
    with open('/work/in.fifo') as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                answer = repr(eval(line, globals()))
            except SyntaxError:
                exec(line, globals())
                answer = 'ok'
            with open('/work/out.tmp', 'w') as o:
                o.write(answer)
            os.rename('/work/out.tmp', '/work/out.txt')
`

async function ask(sbx: Sandbox, line: string): Promise<string> {
  await sbx.files.write('/work/line.txt', `${line}\n`)
  const r = await sbx.exec(
    'rm -f /work/out.txt; cat /work/line.txt > /work/in.fifo; for i in $(seq 200); do [ -f /work/out.txt ] && break; sleep 0.05; done; cat /work/out.txt',
    { timeoutSeconds: 30 },
  )
  return r.stdout
}

describe('fork and snapshot', () => {
  it('forks carry a live process, its memory and the disk; each fork is on its own', async () => {
    const parent = await Sandbox.create({ ...host().conn, metadata: { role: 'parent' } })
    await parent.files.write('/work/repl.py', REPL)
    await parent.exec('mkfifo /work/in.fifo; setsid python3 /work/repl.py > /dev/null 2>&1 < /dev/null &')
    assert.equal(await ask(parent, 'x = 6 * 7'), 'ok')
    assert.equal(await ask(parent, 'x'), '42')
    await parent.files.write('/work/data.txt', 'parent')

    const forks = await parent.fork({ count: 3 })
    try {
      assert.equal(forks.length, 3)
      assert.equal(new Set([parent.id, ...forks.map((f) => f.id)]).size, 4)
      for (const f of forks) {
        assert.equal(f.info.state, 'running')
        assert.deepEqual(f.info.metadata, { role: 'parent' })
        assert.equal(await ask(f, 'x'), '42')
        assert.equal(await f.files.read('/work/data.txt'), 'parent')
      }
      const [a, b, c] = forks as [Sandbox, Sandbox, Sandbox]
      assert.equal(await ask(a, 'x = 1'), 'ok')
      await a.files.write('/work/data.txt', 'fork a')
      assert.equal(await ask(a, 'x'), '1')
      assert.equal(await ask(b, 'x'), '42')
      assert.equal(await b.files.read('/work/data.txt'), 'parent')
      assert.equal(await ask(parent, 'x'), '42')
      assert.equal(await parent.files.read('/work/data.txt'), 'parent')

      // the original goes; its forks do not
      await parent.kill()
      assert.equal(await ask(c, 'x'), '42')
      assert.equal((await c.getInfo()).state, 'running')
    } finally {
      await parent.kill()
      await Promise.all(forks.map((f) => f.kill()))
    }
  })

  it('a snapshot starts new sandboxes later, for its own key only', async () => {
    await using src = await Sandbox.create({ ...host().conn, envs: { FROM: 'source' } })
    await src.files.write('/work/state.txt', 'saved')
    const snap = await src.snapshot()
    assert.equal(snap.sandboxId, src.id)
    assert.ok(snap.sizeBytes > 0)
    // the source carries on, and later changes are not in the snapshot
    await src.files.write('/work/state.txt', 'changed after')

    await using copy = await Sandbox.create({ ...host().conn, snapshot: snap.id })
    assert.equal(await copy.files.read('/work/state.txt'), 'saved')
    assert.equal((await copy.exec('echo $FROM')).stdout, 'source\n')

    const admin = new ForkboxClient(host().conn)
    const other = await admin.keys.create('other')
    const theirs = { url: host().conn.url, apiKey: other.key }
    await assert.rejects(
      Sandbox.create({ ...theirs, snapshot: snap.id }),
      (e: unknown) => e instanceof NotFoundError && e.code === 'SNAPSHOT_NOT_FOUND',
    )
    assert.deepEqual(await new ForkboxClient(theirs).snapshots.list(), [])
    assert.deepEqual(
      (await admin.snapshots.list()).map((s) => s.id),
      [snap.id],
    )
    await admin.snapshots.delete(snap.id)
    await assert.rejects(Sandbox.create({ ...host().conn, snapshot: snap.id }), NotFoundError)
  })

  it('hibernate stops the sandbox; the next call wakes it with memory and disk intact', async () => {
    const sbx = await Sandbox.create({ ...host().conn })
    try {
      await sbx.files.write('/work/repl.py', REPL)
      await sbx.exec('mkfifo /work/in.fifo; setsid python3 /work/repl.py > /dev/null 2>&1 < /dev/null &')
      assert.equal(await ask(sbx, 'x = 42'), 'ok')
      await sbx.files.write('/work/notes.txt', 'before sleep')
      const info = await sbx.hibernate()
      assert.equal(info.state, 'hibernated')
      assert.equal((await sbx.getInfo()).state, 'hibernated')
      // a files call wakes it
      assert.equal(await sbx.files.read('/work/notes.txt'), 'before sleep')
      assert.equal((await sbx.getInfo()).state, 'running')
      assert.equal(await ask(sbx, 'x'), '42')
      // and a second cycle, woken by exec
      await sbx.hibernate()
      assert.equal((await sbx.exec(['cat', '/work/notes.txt'])).stdout, 'before sleep')
      const res = await fetch(`${host().conn.url}/v1/sandboxes/${sbx.id}/events`, {
        headers: { authorization: `Bearer ${host().conn.apiKey}` },
      })
      const types = ((await res.json()) as { events: { type: string }[] }).events.map((e) => e.type)
      assert.deepEqual(
        types.filter((t) => t === 'hibernated' || t === 'woke'),
        ['hibernated', 'woke', 'hibernated', 'woke'],
      )
      // killing a hibernated sandbox ends it for good
      await sbx.hibernate()
      await sbx.kill()
      assert.equal((await sbx.getInfo()).state, 'killed')
      await assert.rejects(sbx.exec(['true']), (e: unknown) => (e as { code?: string }).code === 'SANDBOX_NOT_RUNNING')
    } finally {
      await sbx.kill()
    }
  })
})
