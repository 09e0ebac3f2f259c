// E2B's `Template` builder (the real e2b@2.51.0 client) against a forkbox server on loopback over a
// fake agent: the Dockerfile and context the agent gets, logs, failures and hostile arguments; and
// the wire rules (uploads, tokens, who sees what) through app.request.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import {
  AppError,
  type BuildLogLine,
  type RegistryAuth,
  type TemplateBuildResult,
  type TemplateBuildSpec,
} from '@forkbox/protocol'
import { getRequestListener } from '@hono/node-server'
import { DockerfileParser } from 'dockerfile-ast'
import {
  BuildError,
  type LogEntry,
  Sandbox,
  Template,
  type TemplateBuilder,
  type TemplateClass,
  waitForPort,
} from 'e2b'
import { extract, pack } from 'tar-stream'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

/** Fails the build at `failAt` (a Dockerfile step), with that step's output, when set. */
class StepAgent extends FakeAgent {
  failAt: number | null = null
  override async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
    signal?: AbortSignal,
    registryAuth?: RegistryAuth,
  ): Promise<TemplateBuildResult> {
    if (this.failAt === null) return super.buildTemplate(spec, onLog, signal, registryAuth)
    this.builds.push({ spec, context: null })
    onLog({ step: this.failAt, stream: 'stderr', message: 'sh: 1: nope: not found' })
    throw new AppError('EXEC_FAILED', `step ${this.failAt}: exit code 127`)
  }
}

let dir: string
let files: string
let cp: ControlPlane
let agent: StepAgent
let server: Server
let apiUrl: string
let key: string

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-e2b-tpl-'))
  files = join(dir, 'ctx')
  mkdirSync(join(files, 'app/sub'), { recursive: true })
  writeFileSync(join(files, 'app/main.py'), 'print(1)\n')
  writeFileSync(join(files, 'app/sub/x.txt'), 'x\n')
  writeFileSync(join(files, 'config.json'), '{}\n')
  writeFileSync(join(files, 'a.txt'), 'a\n')
  writeFileSync(join(files, 'b.txt'), 'b\n')
  agent = new StepAgent()
  cp = await createControlPlane({
    agent,
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000 },
  })
  key = (await cp.keys.create({ name: 'e2b', format: 'e2b' })).key
  server = createServer(getRequestListener(cp.app.fetch))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  apiUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})

afterEach(async () => {
  server.closeAllConnections()
  await new Promise((r) => server.close(r))
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
})

/** RUN/CMD's exec form: the command runs under bash where the image has it, else sh. */
const SHELL = '["/bin/sh","-c","exec \\"$(command -v bash || echo /bin/sh)\\" -c \\"$1\\"","e2b-step",'
const run = (cmd: string) => `RUN ${SHELL}${JSON.stringify(cmd)}]`

async function tarEntries(tar: Buffer): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const ex = extract()
  ex.on('entry', (h, body, next) => {
    const chunks: Buffer[] = []
    body.on('data', (c: unknown) => chunks.push(c as Buffer))
    body.on('end', () => {
      out[h.name] = h.type === 'file' ? Buffer.concat(chunks).toString() : `<${h.type}>`
      next()
    })
  })
  await pipeline(Readable.from([tar]), ex)
  return out
}

async function build(t: TemplateClass, name: string, logs: LogEntry[] = []) {
  return Template.build(t, name, { apiKey: key, apiUrl, onBuildLogs: (e) => logs.push(e) })
}

const keywords = (dockerfile: string) =>
  DockerfileParser.parse(dockerfile)
    .getInstructions()
    .map((i) => i.getKeyword())

describe('E2B Template builder', () => {
  it('builds through the v3/v2 routes: the Dockerfile and context the builder gets, logs, then Sandbox.create', async () => {
    const t = Template({ fileContextPath: files })
      .fromImage('127.0.0.1:5000/py:3')
      .runCmd('echo "hello" > /tmp/x')
      .copy('app', '/opt/app')
      .copy('config.json', '/etc/app.json', { user: 'root', mode: 0o600 })
      .copy('*.txt', 'notes')
      .setEnvs({ GREETING: 'hi "there"', PATH: '/opt/bin:$PATH' })
      .setWorkdir('/opt/app')
      .setUser('root')
      .aptInstall(['curl'])
      .runCmd('whoami', { user: 'user' })
      .setStartCmd('python3 -m http.server 8000', waitForPort(8000))
    const logs: LogEntry[] = []
    const started = performance.now()
    const info = await build(t, 'my-tpl', logs)
    assert.equal(info.templateId, 'my-tpl')
    assert.ok(performance.now() - started < 10_000)

    assert.equal(agent.builds.length, 1)
    const { spec, context } = agent.builds[0] as { spec: TemplateBuildSpec; context: Buffer }
    assert.equal(spec.source.kind, 'dockerfile')
    const dockerfile = spec.source.kind === 'dockerfile' ? spec.source.dockerfile : ''
    assert.equal(
      dockerfile,
      [
        'FROM 127.0.0.1:5000/py:3',
        'USER user',
        'WORKDIR "/home/user"',
        run('echo "hello" > /tmp/x'),
        'COPY --chown=user ["e2b/2/app","/opt/app"]',
        'COPY --chown=root --chmod=0600 ["e2b/3/config.json","/etc/app.json"]',
        'COPY --chown=user ["e2b/4","notes/"]',
        'ENV GREETING="hi \\"there\\"" PATH="/opt/bin:$PATH"',
        'USER root',
        'WORKDIR "/opt/app"',
        run('apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y curl'),
        'USER user',
        run('whoami'),
        'USER root',
        `CMD ${SHELL}"python3 -m http.server 8000"]`,
        `HEALTHCHECK CMD ${SHELL}"grep -qsE '^ *[0-9]+: [0-9A-F]+:1F40 [0-9A-F]+:[0-9A-F]+ 0A ' /proc/net/tcp /proc/net/tcp6"]`,
        '',
      ].join('\n'),
    )
    assert.deepEqual(await tarEntries(context), {
      'e2b/2/app': '<directory>',
      'e2b/2/app/main.py': 'print(1)\n',
      'e2b/2/app/sub': '<directory>',
      'e2b/2/app/sub/x.txt': 'x\n',
      'e2b/3/config.json': '{}\n',
      'e2b/4/a.txt': 'a\n',
      'e2b/4/b.txt': 'b\n',
    })
    const messages = logs.map((l) => l.message)
    assert.ok(messages.includes("Uploaded 'app'"), messages.join('\n'))
    assert.ok(
      messages.some((m) => m.startsWith('building u-')),
      messages.join('\n'),
    )
    assert.ok(messages.includes('step output'))
    assert.ok(messages.some((m) => /^ready in /.test(m)))

    // the same files again: already there, not uploaded; the build is the template's version 2
    const again: LogEntry[] = []
    await build(t, 'my-tpl', again)
    assert.ok(again.some((l) => l.message === "Skipping upload of 'app', already cached"))
    assert.equal((await Template.exists('my-tpl', { apiKey: key, apiUrl })) as boolean, true)

    // the alias is the template's name for the key that built it
    await Sandbox.create('my-tpl', { apiKey: key, apiUrl, sandboxUrl: apiUrl })
    const built = (agent.builds[1] as { spec: TemplateBuildSpec }).spec.name
    assert.match(built, /^u-[0-9a-f]+-2$/)
    assert.equal(agent.started.at(-1)?.template, built)
    const other = (await cp.keys.create({ name: 'other', format: 'e2b' })).key
    await assert.rejects(Sandbox.create('my-tpl', { apiKey: other, apiUrl, sandboxUrl: apiUrl }))
  })

  it('builds an image with no steps as an image; fromTemplate as FROM forkbox:<name>', async () => {
    await build(Template().fromImage('127.0.0.1:5000/busybox:1'), 'plain')
    assert.deepEqual(agent.builds[0]?.spec.source, { kind: 'image', image: '127.0.0.1:5000/busybox:1' })
    await build(Template().fromTemplate('code-interpreter-v1').runCmd('true'), 'from-ci')
    const src = agent.builds[1]?.spec.source
    assert.equal(src?.kind === 'dockerfile' && src.dockerfile.split('\n')[0], 'FROM forkbox:code-interpreter')
  })

  it("fromImage with a login: kept sealed as the key's for that registry, and the build pulls with it", async () => {
    const login = { username: 'alice', password: 'pw-e2b' }
    await build(Template().fromImage('registry.example:5000/team/app:1', login).runCmd('true'), 'private-img')
    assert.deepEqual(agent.buildAuth.at(-1), { 'registry.example:5000': login })
    const listed = await cp.app.request('/v1/registries', { headers: { authorization: `Bearer ${key}` } })
    const body = await listed.json()
    assert.deepEqual(
      body.registries.map((r: { registry: string; username: string }) => [r.registry, r.username]),
      [['registry.example:5000', 'alice']],
    )
    assert.ok(!JSON.stringify(body).includes(login.password))
    // AWS's and GCP's logins are not served, by name
    await assert.rejects(
      build(
        Template().fromAWSRegistry('1.dkr.ecr.us-east-1.amazonaws.com/app:1', {
          accessKeyId: 'a',
          secretAccessKey: 'b',
          region: 'us-east-1',
        }),
        'aws-img',
      ),
      /fromAWSRegistry is not supported/,
    )
  })

  it('surfaces a failing step as the client BuildError, with the step and its output', async () => {
    agent.failAt = 3 // WORKDIR, RUN true, RUN nope
    const logs: LogEntry[] = []
    const t = Template().fromImage('img:1').runCmd('true').runCmd('nope')
    const err = await build(t, 'broken', logs).then(
      () => assert.fail('the build should fail'),
      (e: unknown) => e,
    )
    assert.ok(err instanceof BuildError, String(err))
    assert.match(err.message, /step 3: exit code 127/)
    // the client points at the failing step's line of the template: runCmd('nope') above
    assert.match(err.stack ?? '', /e2b-templates\.test\.ts/)
    assert.ok(logs.some((l) => l.message === 'sh: 1: nope: not found'))
    assert.ok(logs.some((l) => l.level === 'error' && l.message.startsWith('failed: ')))
  })

  it("reaches the key's scopes: a templates scope's names and FROM, a noNetwork key's offline steps", async () => {
    const scoped = (await cp.keys.create({ name: 'scoped', format: 'e2b', scopes: { templates: ['ok'] } })).key
    const as = (k: string, t: TemplateClass, name: string) => Template.build(t, name, { apiKey: k, apiUrl })
    await assert.rejects(
      as(scoped, Template().fromImage('img:1').runCmd('true'), 'nope'),
      /only build the templates ok/,
    )
    await assert.rejects(
      as(scoped, Template().fromTemplate('code-interpreter-v1').runCmd('true'), 'ok'),
      /FROM forkbox:code-interpreter: this key may only use the templates ok/,
    )
    assert.equal(agent.builds.length, 0)
    await as(scoped, Template().fromImage('img:1').runCmd('true'), 'ok')
    assert.equal(agent.builds.at(-1)?.spec.buildNetwork, undefined)
    const offline = (await cp.keys.create({ name: 'offline', format: 'e2b', scopes: { noNetwork: true } })).key
    await as(offline, Template().fromImage('img:1').runCmd('true'), 'offline')
    assert.equal(agent.builds.at(-1)?.spec.buildNetwork, 'none')
  })

  it('keeps hostile step arguments data: no instruction is added, swallowed or broken', async () => {
    const evil = [
      'echo a\nUSER root\nRUN evil',
      'cat <<EOF\nFROM scratch\nEOF',
      'echo "]\nRUN x',
      'echo \\',
      'echo \u2028 \u0085',
    ]
    let t: TemplateBuilder = Template({ fileContextPath: files }).fromImage('img:1')
    for (const cmd of evil) t = t.runCmd(cmd)
    t = t.setEnvs({ A: 'x" B="y', C: 'ends with \\' }).setWorkdir('/tmp/a" b').copy('config.json', '/etc/"]\nRUN x')
    // what cannot be said on one line is refused, naming the step (the copy is step 8)
    await assert.rejects(
      build(t, 'evil'),
      (e: Error) => e instanceof BuildError && /step 8: the destination contains a line break/.test(e.message),
    )

    t = Template({ fileContextPath: files }).fromImage('img:1')
    for (const cmd of evil) t = t.runCmd(cmd)
    const final = t
      .setEnvs({ A: 'x" B="y', C: 'ends with \\' })
      .setWorkdir('/tmp/a" b')
      .copy('config.json', '/etc/"] RUN x')
      .setStartCmd('sleep 1 <<X', 'true\nUSER root')
    await build(final, 'evil2')
    const src = agent.builds.at(-1)?.spec.source
    const dockerfile = src?.kind === 'dockerfile' ? src.dockerfile : ''
    assert.deepEqual(keywords(dockerfile), [
      'FROM',
      'USER',
      'WORKDIR',
      ...evil.map(() => 'RUN'),
      'ENV',
      'WORKDIR',
      'COPY',
      'CMD',
      'HEALTHCHECK',
    ])
    // every command comes back whole from the exec form's JSON
    const runs = DockerfileParser.parse(dockerfile)
      .getInstructions()
      .filter((i) => i.getKeyword() === 'RUN')
      .map((i) => (JSON.parse(i.getArgumentsContent() ?? '') as string[])[4])
    assert.deepEqual(runs, evil)
    assert.match(dockerfile, /^ENV A="x\\" B=\\"y" C="ends with \\\\"$/m)
  })
})

describe('E2B template routes', () => {
  const h = () => ({ 'X-API-KEY': key, 'content-type': 'application/json' })

  async function requestBuild(name: string): Promise<{ templateID: string; buildID: string }> {
    const res = await cp.app.request('/v3/templates', { method: 'POST', headers: h(), body: JSON.stringify({ name }) })
    assert.equal(res.status, 202)
    return res.json()
  }

  async function uploadUrl(templateID: string, hash: string): Promise<{ present: boolean; url: string }> {
    const res = await cp.app.request(`/templates/${templateID}/files/${hash}`, { headers: h() })
    assert.equal(res.status, 201)
    return res.json()
  }

  async function tarOf(entries: { name: string; type?: 'file' | 'symlink' | 'directory'; linkname?: string }[]) {
    const p = pack()
    for (const e of entries) p.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname }, e.type ? '' : 'x')
    p.finalize()
    const chunks: Buffer[] = []
    for await (const c of p) chunks.push(c as Buffer)
    return Buffer.concat(chunks)
  }

  it('refuses unknown step types, tags and built-in names, naming what', async () => {
    const { templateID, buildID } = await requestBuild('t1')
    const res = await cp.app.request(`/v2/templates/${templateID}/builds/${buildID}`, {
      method: 'POST',
      headers: h(),
      body: JSON.stringify({
        fromImage: 'img:1',
        steps: [
          { type: 'RUN', args: ['true'] },
          { type: 'ADD', args: [] },
        ],
      }),
    })
    assert.equal(res.status, 400)
    const body = await res.json()
    assert.equal(body.code, 400)
    assert.match(body.message, /^step 2: step type "ADD" is not supported/)
    for (const name of ['base', 'code-interpreter-v1']) {
      const r = await cp.app.request('/v3/templates', { method: 'POST', headers: h(), body: JSON.stringify({ name }) })
      assert.equal(r.status, 400, name)
    }
    const tagged = await cp.app.request('/v3/templates', {
      method: 'POST',
      headers: h(),
      body: JSON.stringify({ name: 'x', tags: ['v1'] }),
    })
    assert.equal(tagged.status, 501)
  })

  it('takes uploads only with their URL token, checks them, and keeps them per key', async () => {
    const { templateID } = await requestBuild('t2')
    const hash = 'a'.repeat(64)
    const link = await uploadUrl(templateID, hash)
    assert.equal(link.present, false)
    const path = new URL(link.url)
    assert.equal(path.pathname, `/e2b-uploads/${hash}`)
    const put = (url: string, body: Buffer) => cp.app.request(url, { method: 'PUT', body: new Uint8Array(body) })

    for (const bad of [
      [{ name: '../evil' }],
      [{ name: '/etc/passwd' }],
      [{ name: 'l', type: 'symlink' as const, linkname: '../../x' }],
      [{ name: 'l', type: 'symlink' as const, linkname: '/etc' }],
      [{ name: 'd', type: 'symlink' as const, linkname: '.' }, { name: 'd/f' }],
    ]) {
      const res = await put(`${path.pathname}${path.search}`, await tarOf(bad))
      assert.equal(res.status, 400, JSON.stringify(bad))
      assert.equal((await res.json()).errorCode, 'INVALID_PATH')
    }
    const forged = new URL(link.url)
    forged.searchParams.set('token', 'fbu_0000')
    assert.equal((await put(`${forged.pathname}${forged.search}`, await tarOf([{ name: 'f' }]))).status, 401)
    const otherHash = new URL(link.url.replace(hash, 'b'.repeat(64)))
    assert.equal((await put(`${otherHash.pathname}${otherHash.search}`, await tarOf([{ name: 'f' }]))).status, 401)

    const ok = await put(`${path.pathname}${path.search}`, gzipSync(await tarOf([{ name: 'dir/f' }])))
    assert.equal(ok.status, 200)
    assert.equal((await uploadUrl(templateID, hash)).present, true)
    // another key has its own files: the same hash is not there for it
    const other = (await cp.keys.create({ name: 'other', format: 'e2b' })).key
    const theirs = await cp.app.request(`/templates/${templateID}/files/${hash}`, { headers: { 'X-API-KEY': other } })
    assert.equal((await theirs.json()).present, false)
  })

  it("answers another key's build as not found, and a COPY whose files never came as the client's error", async () => {
    const { templateID, buildID } = await requestBuild('t3')
    const other = (await cp.keys.create({ name: 'other', format: 'e2b' })).key
    const theirs = await cp.app.request(`/templates/${templateID}/builds/${buildID}/status`, {
      headers: { 'X-API-KEY': other },
    })
    assert.equal(theirs.status, 404)
    const mine = await cp.app.request(`/templates/${templateID}/builds/${buildID}/status?logsOffset=0`, {
      headers: h(),
    })
    assert.deepEqual(await mine.json(), { templateID, buildID, logs: [], status: 'waiting', logEntries: [] })
    const res = await cp.app.request(`/v2/templates/${templateID}/builds/${buildID}`, {
      method: 'POST',
      headers: h(),
      body: JSON.stringify({
        fromImage: 'img:1',
        steps: [{ type: 'COPY', args: ['a', '/a', '', ''], filesHash: 'c'.repeat(64) }],
      }),
    })
    assert.equal(res.status, 400)
    assert.match((await res.json()).message, /^step 1 \(COPY\): its files .* were not uploaded/)
    assert.equal(agent.builds.length, 0)
  })
})
