import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ForkboxClient, Sandbox } from '../src/index.ts'
import { bodyJson, useTestServer } from './server.ts'

const server = useTestServer()

describe('Sandbox', () => {
  it('create sends only the given fields with the bearer key', async () => {
    const s = server()
    const sbx = await Sandbox.create({ ...s.conn(), template: 'base', ttlSeconds: 60, metadata: { a: 'b' } })
    const req = s.requests[0]
    assert.ok(req)
    assert.equal(req.method, 'POST')
    assert.equal(req.url.href, 'http://forkbox.test/v1/sandboxes')
    assert.equal(req.headers.get('authorization'), `Bearer ${s.apiKey}`)
    assert.deepEqual(bodyJson(req), { template: 'base', ttlSeconds: 60, metadata: { a: 'b' } })
    assert.match(sbx.id, /^sbx/)
    assert.deepEqual(sbx.info.metadata, { a: 'b' })
    assert.equal(sbx.info.state, 'running')
    assert.deepEqual(
      s.agent.started.map((spec) => spec.id),
      [sbx.id],
    )
  })

  it('list filters by state and metadata pairs', async () => {
    const s = server()
    const a = await Sandbox.create({ ...s.conn(), metadata: { user: 'a b', 'k.x': '1' } })
    const b = await Sandbox.create({ ...s.conn(), metadata: { user: 'other' } })
    await b.kill()
    const mine = await Sandbox.list({ ...s.conn(), metadata: { user: 'a b', 'k.x': '1' } })
    assert.deepEqual(
      mine.map((i) => i.id),
      [a.id],
    )
    const running = await Sandbox.list({ ...s.conn(), state: 'running' })
    assert.deepEqual(
      running.map((i) => i.id),
      [a.id],
    )
    const params = s.requests.at(-2)?.url.searchParams
    assert.equal(params?.get('metadata.user'), 'a b')
    assert.equal(params?.get('metadata.k.x'), '1')
  })

  it('exec returns strings and sends stdin bytes as base64', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    s.agent.nextExec = { exitCode: 3, stderr: Buffer.from('err\n') }
    const out = await sbx.exec(['cat'], { stdin: new Uint8Array([1, 2, 3]), timeoutSeconds: 5, cwd: '/tmp' })
    assert.deepEqual(out, {
      exitCode: 3,
      stdout: 'ran cat',
      stderr: 'err\n',
      signal: null,
      timedOut: false,
      truncated: false,
      durationMs: 1,
    })
    const req = s.requests[1]
    assert.ok(req)
    assert.equal(req.url.pathname, `/v1/sandboxes/${sbx.id}/exec`)
    assert.deepEqual(bodyJson(req), {
      cmd: ['cat'],
      cwd: '/tmp',
      timeoutSeconds: 5,
      encoding: 'utf8',
      stdin: 'AQID',
      stdinEncoding: 'base64',
    })
  })

  it('execBytes asks for base64 and decodes it', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    s.agent.nextExec = { stdout: Buffer.from([255, 0]) }
    const out = await sbx.execBytes('printf x', { stdin: 'text' })
    assert.deepEqual(out.stdout, new Uint8Array([255, 0]))
    assert.deepEqual(out.stderr, new Uint8Array())
    assert.deepEqual(bodyJson(s.requests[1]), { cmd: 'printf x', stdin: 'text', encoding: 'base64' })
  })

  it('exec streams output to the callbacks and execStream yields it', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const seen: string[] = []
    const out = await sbx.exec('echo hi', {
      onStdout: (d) => seen.push(`out:${d}`),
      onStderr: (d) => seen.push(`err:${d}`),
    })
    assert.equal(out.exitCode, 0)
    assert.deepEqual(seen, ['out:ran ', 'out:echo hi', 'err:err'])
    const events = []
    for await (const e of sbx.execStream('echo hi')) events.push(e.type)
    assert.deepEqual(events, ['stdout', 'stdout', 'stderr', 'exit'])
  })

  it('setTimeout and getInfo refresh info', async () => {
    const s = server()
    const sbx = await Sandbox.create({ ...s.conn(), ttlSeconds: 60 })
    const before = Date.parse(sbx.info.expiresAt)
    const info = await sbx.setTimeout(600)
    assert.ok(Date.parse(info.expiresAt) - before > 500_000)
    assert.equal(sbx.info.expiresAt, info.expiresAt)
    assert.deepEqual(bodyJson(s.requests[1]), { ttlSeconds: 600 })
    await Sandbox.kill(sbx.id, s.conn())
    assert.equal((await sbx.getInfo()).state, 'killed')
    assert.equal(sbx.info.state, 'killed')
  })

  it('await using kills the sandbox at the end of the block', async () => {
    const s = server()
    let id = ''
    {
      await using sbx = await Sandbox.create(s.conn())
      id = sbx.id
      assert.deepEqual(s.agent.stopped, [])
    }
    assert.deepEqual(s.agent.stopped, [id])
    assert.deepEqual(
      s.requests.map((r) => `${r.method} ${r.url.pathname}`),
      ['POST /v1/sandboxes', `DELETE /v1/sandboxes/${id}`],
    )
  })

  it('snapshot, fork, hibernate, metrics and events reach their routes', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const snap = await sbx.snapshot()
    assert.equal(snap.sandboxId, sbx.id)
    const forks = await sbx.fork({ count: 2 })
    assert.equal(forks.length, 2)
    const metrics = await sbx.getMetrics()
    assert.equal(typeof metrics, 'object')
    assert.equal((await sbx.hibernate()).state, 'hibernated')
    const client = new ForkboxClient(s.conn())
    assert.deepEqual(
      (await client.snapshots.list()).map((x) => x.id),
      [snap.id],
    )
    const types: string[] = []
    for await (const e of sbx.events()) {
      types.push(e.type)
      if (e.type === 'hibernated') break
    }
    assert.deepEqual(types, ['created', 'started', 'snapshotted', 'forked', 'hibernated'])
  })

  it('runCode streams output and results', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const out: string[] = []
    const execution = await sbx.runCode('1 + 1', { onStdout: (t) => out.push(t) })
    assert.equal(execution.text, '1 + 1')
    assert.equal(out.join(''), '1 + 1 é\n')
    assert.deepEqual(execution.logs.stderr, ['warn\n'])
  })

  it('background processes: start, then wait for the exit', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const proc = await sbx.exec('sleep 1', { background: true })
    assert.equal(proc.pid, 42)
    assert.equal((await proc.wait()).exitCode, 0)
  })
})

describe('ForkboxClient', () => {
  it('creates, lists and revokes keys', async () => {
    const s = server()
    const client = new ForkboxClient(s.conn())
    const created = await client.keys.create('ci')
    assert.match(created.key, /^fbx_/)
    assert.deepEqual(
      (await client.keys.list()).map((k) => k.name),
      ['admin', 'ci'],
    )
    await client.keys.revoke(created.id)
    const revoked = (await client.keys.list()).find((k) => k.id === created.id)
    assert.ok(revoked?.revokedAt)
    assert.deepEqual(bodyJson(s.requests[0]), { name: 'ci' })
  })

  it('lists templates', async () => {
    const s = server()
    const client = new ForkboxClient(s.conn())
    assert.deepEqual(
      (await client.templates.list()).map((t) => t.name),
      ['base'],
    )
  })
})
