// Template builds through the SDK against the real server app: logs in order, failures as typed
// errors, context uploads (a directory, bytes, a stream) and a log stream cut mid-event.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { after, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { pack } from 'tar-stream'
import {
  type BuildLogEntry,
  ForkboxClient,
  NotFoundError,
  Sandbox,
  Template,
  TemplateBuildError,
  ValidationError,
} from '../src/index.ts'
import { bodyJson, useTestServer } from './server.ts'
import { cuttingProxy, serveOverTcp } from './tcp.ts'

const server = useTestServer()
const dirs: string[] = []
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function contextDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'forkbox-context-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'Dockerfile'), 'FROM forkbox:base\nCOPY . /app\n')
  writeFileSync(join(dir, '.dockerignore'), 'secret.txt\n')
  writeFileSync(join(dir, 'secret.txt'), 'kept: the builder filters, not the SDK')
  mkdirSync(join(dir, 'src'))
  writeFileSync(join(dir, 'src', 'main.py'), 'print("hi")\n')
  symlinkSync('src/main.py', join(dir, 'main.py'))
  return dir
}

async function tarOf(files: Record<string, string>): Promise<Buffer> {
  const p = pack()
  for (const [name, text] of Object.entries(files)) p.entry({ name }, text)
  p.finalize()
  const chunks: Buffer[] = []
  for await (const c of p) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

const contextLine = (logs: BuildLogEntry[]) => logs.find((l) => l.message.startsWith('context: '))?.message

describe('Template.build', () => {
  it('builds from an image, passing every log line to onLog in order; the template is listed and creatable', async () => {
    const s = server()
    s.agent.stepLines = 12
    const seen: BuildLogEntry[] = []
    const build = await Template.build({
      ...s.conn(),
      name: 'my-env',
      image: 'registry.local/env:1',
      description: 'mine',
      resources: { memoryMB: 1024 },
      startCmd: 'python3 -m http.server 8000',
      readyCmd: 'curl -sf localhost:8000',
      onLog: (e) => seen.push(e),
    })
    assert.equal(build.status, 'ready')
    assert.deepEqual([build.template, build.version], ['my-env', 1])
    assert.deepEqual(
      seen.map((e) => e.seq),
      seen.map((_, i) => i),
    )
    assert.ok(seen.some((e) => e.step === 2 && e.message === 'line 11'))
    assert.match(seen.at(-1)?.message ?? '', /^ready in/)
    assert.deepEqual(bodyJson(s.requests[0]), {
      name: 'my-env',
      image: 'registry.local/env:1',
      description: 'mine',
      resources: { memoryMB: 1024 },
      startCmd: 'python3 -m http.server 8000',
      readyCmd: 'curl -sf localhost:8000',
    })
    const listed = await new ForkboxClient(s.conn()).templates.list()
    assert.deepEqual(
      listed.map((t) => [t.name, t.version, t.public]),
      [
        ['base', null, true],
        ['my-env', 1, false],
      ],
    )
    const got = await Template.get('my-env', s.conn())
    assert.deepEqual(
      got.builds.map((b) => b.id),
      [build.id],
    )
    const full = await Template.getBuild(build.id, { ...s.conn(), logsOffset: 3 })
    assert.deepEqual(
      full.logs.map((l) => l.seq),
      seen.slice(3).map((l) => l.seq),
    )
    const logged: number[] = []
    for await (const l of Template.logs(build.id, s.conn())) logged.push(l.seq)
    assert.deepEqual(
      logged,
      seen.map((l) => l.seq),
    )
    const sbx = await Sandbox.create({ ...s.conn(), template: `my-env@${build.version}` })
    assert.equal(sbx.info.state, 'running')
  })

  it('a failed build rejects with its code, message and log tail', async () => {
    const s = server()
    s.agent.buildError = new AppError('IMAGE_NOT_FOUND', 'image nope:1 not found in its registry')
    const err = await Template.build({ ...s.conn(), name: 'broken', image: 'nope:1' }).catch((e: unknown) => e)
    assert.ok(err instanceof TemplateBuildError, String(err))
    assert.equal(err.code, 'IMAGE_NOT_FOUND')
    assert.equal(err.build.status, 'failed')
    assert.match(err.message, /^image nope:1 not found in its registry\n {2}build bld-[\s\S]*\n {2}building u-/)
    assert.match(err.logTail.at(-1)?.message ?? '', /^failed: image nope:1/)
    assert.equal(err.details?.buildId, err.buildId)
  })

  it('a request the server refuses rejects before any build', async () => {
    const s = server()
    await assert.rejects(Template.build({ ...s.conn(), name: 'base', image: 'x:1' }), ValidationError)
    await assert.rejects(Template.get('nope', s.conn()), NotFoundError)
  })

  it('tars a directory as it is (its Dockerfile by default) and uploads it', async () => {
    const s = server()
    const dir = contextDir()
    const seen: BuildLogEntry[] = []
    const build = await Template.build({ ...s.conn(), name: 'app', context: dir, onLog: (e) => seen.push(e) })
    assert.equal(build.status, 'ready')
    assert.deepEqual(bodyJson(s.requests[0]), {
      name: 'app',
      dockerfile: 'FROM forkbox:base\nCOPY . /app\n',
      context: true,
    })
    const upload = s.requests[1]
    assert.equal(`${upload?.method} ${upload?.url.pathname}`, `PUT /v1/builds/${build.id}/context`)
    assert.equal(upload?.headers.get('content-type'), 'application/x-tar')
    assert.equal(
      contextLine(seen),
      'context: .dockerignore (11 bytes), Dockerfile (30 bytes), main.py -> src/main.py, secret.txt (38 bytes), src/, src/main.py (12 bytes)',
    )
  })

  it('uploads a tar given as bytes, a Node stream or a web stream, byte for byte', async () => {
    const s = server()
    const tar = await tarOf({ 'a.txt': 'hello', 'dir/b.txt': 'bye' })
    const sources = [
      tar,
      Readable.from([tar.subarray(0, 700), tar.subarray(700)]),
      new Blob([new Uint8Array(tar)]).stream(),
    ]
    for (const [i, context] of sources.entries()) {
      const logs: BuildLogEntry[] = []
      await Template.build({ ...s.conn(), name: `t${i}`, dockerfile: 'FROM x', context, onLog: (e) => logs.push(e) })
      assert.equal(contextLine(logs), 'context: a.txt (5 bytes), dir/b.txt (3 bytes)')
      const upload = s.requests.filter((r) => r.method === 'PUT').at(-1)
      assert.deepEqual(upload?.body, new Uint8Array(tar))
    }
  })

  it('a context that cannot be read fails with its own reason, a missing directory before any request', async () => {
    const s = server()
    await assert.rejects(
      Template.build({ ...s.conn(), name: 'x', dockerfile: 'FROM x', context: join(tmpdir(), 'no-such-context') }),
      /ENOENT/,
    )
    assert.equal(s.requests.length, 0)
    const tar = await tarOf({ 'a.txt': 'hello' })
    async function* breaking() {
      yield tar.subarray(0, 512)
      throw new Error('the disk went away')
    }
    await assert.rejects(
      Template.build({ ...s.conn(), name: 'x', dockerfile: 'FROM x', context: breaking() }),
      /the disk went away/,
    )
  })

  // over real sockets: the directory streams up through Node's own fetch, the proxy cuts the log once
  it('a log stream cut mid-event resumes after the last whole line: none missing, none twice', async () => {
    const s = server()
    s.agent.stepLines = 40
    const tcp = await serveOverTcp(s.cp)
    const proxy = await cuttingProxy(tcp.url, 15)
    try {
      const seen: BuildLogEntry[] = []
      const build = await Template.build({
        apiKey: s.apiKey,
        url: proxy.url,
        name: 'cut',
        context: contextDir(),
        onLog: (e) => seen.push(e),
      })
      assert.equal(proxy.cuts(), 1)
      assert.equal(build.status, 'ready')
      const stored = await Template.getBuild(build.id, { apiKey: s.apiKey, url: tcp.url })
      assert.deepEqual(seen, stored.logs)
      assert.ok(seen.length > 40)
      assert.match(contextLine(seen) ?? '', /^context: \.dockerignore \(11 bytes\), Dockerfile/)
    } finally {
      await proxy.close()
      await tcp.close()
    }
  })

  it('Template.delete and client.templates.delete remove it', async () => {
    const s = server()
    await Template.build({ ...s.conn(), name: 'gone', image: 'img:1' })
    await new ForkboxClient(s.conn()).templates.delete('gone')
    await assert.rejects(Template.delete('gone', s.conn()), NotFoundError)
    assert.deepEqual(
      (await Template.list(s.conn())).map((t) => t.name),
      ['base'],
    )
  })
})
