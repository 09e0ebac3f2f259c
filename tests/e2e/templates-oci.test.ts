// Templates from OCI images: a local registry (Debian's docker-registry) holds an image made from the
// baked `base` rootfs and one of only a static busybox; templates naming them are pulled without a
// Docker engine, baked, and created from.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ForkboxError, Sandbox, Template, TemplateBuildError } from '@forkbox/sdk'
import { cleanupDataDir, leftovers, NOTHING_LEFT, sharedTemplatesDir, startTestHost, type TestHost } from './harness.ts'
import { baseRootfs, makeImageLayout, pulledLayout, startRegistry, type TestRegistry } from './registry.ts'

const repoRoot = new URL('../../', import.meta.url).pathname
const work = mkdtempSync(join(tmpdir(), 'forkbox-e2e-oci-'))
const definitionsDir = join(work, 'definitions')
const PREFIX = `fbx-oci-${process.pid}`
let registry: TestRegistry | undefined
let port = 0
let digest = ''
let bareDigest = ''

function stopRegistry(): void {
  registry?.stop()
  registry = undefined
}

/**
 * A root holding only a static busybox and its applets' links: no Python, no libc, no bash, no
 * /etc. The guest brings its own runtime, so everything but runCode works in it.
 */
function busyboxRootfs(): string {
  const root = join(work, 'busybox')
  if (existsSync(root)) return root
  mkdirSync(join(root, 'bin'), { recursive: true })
  cpSync('/bin/busybox', join(root, 'bin/busybox'))
  const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)
  for (const a of applets) if (a !== 'busybox') symlinkSync('busybox', join(root, 'bin', a))
  return root
}

function define(name: string, image: string): void {
  const base = JSON.parse(readFileSync(join(repoRoot, 'templates/base/template.json'), 'utf8'))
  mkdirSync(join(definitionsDir, name))
  const { packages: _, ...rest } = base
  writeFileSync(join(definitionsDir, name, 'template.json'), JSON.stringify({ ...rest, name, image }))
}

let t: TestHost | undefined
const host = (): TestHost => {
  if (!t) throw new Error('the test host is not started')
  return t
}

// not useTestHost: the registry, the image and the definitions must exist before the host starts
before(async () => {
  registry = await startRegistry(work)
  port = registry.port
  digest = registry.push(baseRootfs(), 'fbx-test:1')
  bareDigest = registry.push(busyboxRootfs(), 'fbx-busybox:1')
  // the host still prebuilds `base`: its definition comes along
  mkdirSync(definitionsDir)
  cpSync(join(repoRoot, 'templates/base'), join(definitionsDir, 'base'), { recursive: true })
  define(`${PREFIX}-tag`, `127.0.0.1:${port}/fbx-test:1`)
  define(`${PREFIX}-pinned`, `127.0.0.1:${port}/fbx-test@${digest}`)
  define(`${PREFIX}-missing`, `127.0.0.1:${port}/fbx-test:nope`)
  define(`${PREFIX}-bad`, `-127.0.0.1:${port}/fbx-test:1`)
  define(`${PREFIX}-busybox`, `127.0.0.1:${port}/fbx-busybox:1`)
  // the test's registries are on loopback: only an operator's allow-list lets pulls reach them
  t = await startTestHost({ definitionsDir, poolSize: 0, registryAllow: ['127.0.0.1'] })
})

after(async () => {
  stopRegistry()
  try {
    if (t) {
      await t.stop()
      assert.deepEqual(leftovers(t), NOTHING_LEFT)
      cleanupDataDir(t)
    }
  } finally {
    // the image templates' rootfs, snapshots and pulled layout live in the shared templates dir
    for (const name of readdirSync(sharedTemplatesDir))
      if (name.startsWith(PREFIX)) rmSync(join(sharedTemplatesDir, name), { recursive: true, force: true })
    for (const d of [digest, bareDigest]) if (d) rmSync(pulledLayout(d), { recursive: true, force: true })
    rmSync(work, { recursive: true, force: true })
  }
})

/** A JSON call on the test host's API, as the bootstrap key unless `key` says otherwise. */
async function call(method: string, path: string, body?: unknown, key = host().conn.apiKey) {
  const res = await fetch(`${host().conn.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: await res.json().catch(() => null) }
}

/** The build once it has ended (ready or failed). */
async function settle(buildId: string, key = host().conn.apiKey) {
  for (let i = 0; i < 1200; i++) {
    const b = (await call('GET', `/v1/builds/${buildId}`, undefined, key)).body
    if (b.status === 'ready' || b.status === 'failed') return b
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`build ${buildId} did not end`)
}

describe('templates from OCI images', () => {
  it('pulls the image by tag, bakes it, and a sandbox from it runs commands and round-trips files', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-tag`, ttlSeconds: 120 })
    assert.ok(existsSync(pulledLayout(digest)), 'the image is in the pull cache under its digest')
    const baked = readdirSync(sharedTemplatesDir).filter((n) => n.startsWith(`${PREFIX}-tag-`))
    assert.ok(
      baked.some((n) => n.includes('.snapshot-')),
      `baked into a snapshot as the built-in templates are: ${baked}`,
    )
    const os = await sbx.exec(['cat', '/etc/os-release'])
    assert.equal(os.exitCode, 0, os.stderr)
    assert.match(os.stdout, /Debian GNU\/Linux 12/)
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
    await sbx.files.write('/work/round.bin', bytes)
    assert.deepEqual(Buffer.from(await sbx.files.read('/work/round.bin', { format: 'bytes' })), bytes)
    assert.equal((await sbx.exec(['id', '-un'])).stdout, 'user\n')
  })

  it('a bad reference and a missing tag are clear errors, and the host carries on', async () => {
    await assert.rejects(Sandbox.create({ ...host().conn, template: `${PREFIX}-bad` }), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'VALIDATION_FAILED')
      assert.match(e.message, /invalid image reference/)
      return true
    })
    await assert.rejects(Sandbox.create({ ...host().conn, template: `${PREFIX}-missing` }), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'IMAGE_NOT_FOUND')
      assert.match(e.message, /fbx-test:nope/)
      return true
    })
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-tag` })
    assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  })

  it('an image of only a static busybox gets the full guest: exec, files, terminal, background processes', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-busybox`, ttlSeconds: 120 })
    // nothing of the guest's runtime shows in the image's own paths
    const probe = await sbx.exec('ls /usr/bin/python3 /lib/x86_64-linux-gnu/libc.so.6 /bin/bash 2>&1; echo "sh=$0"')
    assert.match(probe.stdout, /python3.*No such file/, JSON.stringify(probe))
    assert.match(probe.stdout, /libc\.so\.6.*No such file/)
    assert.match(probe.stdout, /sh=\/bin\/sh\n$/, 'a command string falls back to /bin/sh')
    assert.match((await sbx.exec(['busybox'])).stdout, /BusyBox v1/)
    // E2B's clients send every command as `/bin/bash -l -c ...`: without bash it runs in /bin/sh
    assert.equal((await sbx.exec(['/bin/bash', '-l', '-c', 'echo "via $0"'])).stdout, 'via /bin/sh\n')
    assert.equal((await sbx.exec(['id', '-un'])).stdout, 'user\n')
    const bytes = Buffer.from(Array.from({ length: 256 * 64 }, (_, i) => (i * 7) % 256))
    await sbx.files.write('/work/round.bin', bytes)
    assert.deepEqual(Buffer.from(await sbx.files.read('/work/round.bin', { format: 'bytes' })), bytes)
    assert.equal(
      (await sbx.exec(['md5sum', '/work/round.bin'])).stdout.split(' ')[0],
      createHash('md5').update(bytes).digest('hex'),
    )
    // a terminal: busybox's sh, interactive
    let text = ''
    const decoder = new TextDecoder()
    const term = await sbx.pty.create({
      cols: 90,
      rows: 20,
      onData: (d) => (text += decoder.decode(d, { stream: true })),
    })
    term.sendInput('echo "cols=$(stty size)"; exit 5\n')
    assert.deepEqual(await term.wait(), { exitCode: 5, signal: null })
    assert.match(text, /cols=20 90/)
    // a background process outlives its call and is read back
    const proc = await sbx.exec('for i in 1 2 3; do echo "tick $i"; sleep 0.1; done; exit 3', { background: true })
    let out = ''
    assert.equal((await proc.wait({ onStdout: (d) => (out += d) })).exitCode, 3)
    assert.equal(out, 'tick 1\ntick 2\ntick 3\n')
    // code runs on the image's Python, which this one lacks: said clearly
    await assert.rejects(sbx.runCode('1 + 1'), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'CODE_RUNTIME_MISSING')
      assert.match(e.message, /no Python 3/)
      return true
    })
  })

  it('a template built through the API from an image: logged build, then creates by name from its snapshot', async () => {
    const { url, apiKey } = host().conn
    const name = `api-${process.pid}`
    const r = await call('POST', '/v1/templates', { name, image: `127.0.0.1:${port}/fbx-busybox:1` })
    assert.equal(r.status, 202, JSON.stringify(r.body))
    // the log streams live over SSE and ends with the build
    const res = await fetch(`${url}/v1/builds/${r.body.build.id}/logs`, {
      headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' },
    })
    const text = await res.text()
    assert.match(text, /event: log[\s\S]*bake[\s\S]*event: end/)
    const build = (await call('GET', `/v1/builds/${r.body.build.id}`)).body
    assert.equal(build.status, 'ready', JSON.stringify(build))
    const agentName = `u-${r.body.template.id.replace('tpl-', '')}-1`
    assert.ok(
      readdirSync(sharedTemplatesDir).some((n) => n.startsWith(`${agentName}-`) && n.includes('.snapshot-')),
      'baked like a built-in template',
    )
    await using sbx = await Sandbox.create({ ...host().conn, template: name })
    assert.match((await sbx.exec(['busybox'])).stdout, /BusyBox/)
    // another key sees neither the template nor a way in through the agent's name for it
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    for (const template of [name, agentName]) {
      const denied = await call('POST', '/v1/sandboxes', { template }, other)
      assert.equal(denied.body?.error?.code, 'TEMPLATE_NOT_FOUND', template)
    }
    // a missing image fails the build with its registry's answer; the host carries on
    const bad = await call('POST', '/v1/templates', {
      name: `${name}-bad`,
      image: `127.0.0.1:${port}/fbx-busybox:nope`,
    })
    let failed = bad.body.build
    for (let i = 0; i < 100 && failed.status !== 'failed'; i++) {
      await new Promise((r) => setTimeout(r, 100))
      failed = (await call('GET', `/v1/builds/${failed.id}`)).body
    }
    assert.equal(failed.error?.code, 'IMAGE_NOT_FOUND', JSON.stringify(failed))
    assert.equal((await call('DELETE', `/v1/templates/${name}`)).status, 204)
    assert.equal((await call('POST', '/v1/sandboxes', { template: name })).body?.error?.code, 'TEMPLATE_NOT_FOUND')
    // its rootfs stays while a sandbox runs from it (removed once none does)
    assert.equal((await sbx.exec(['echo', 'still'])).stdout, 'still\n', 'a sandbox running from it carries on')
  })

  it("a registry that wants a login: builds pull with their key's login, others are refused even from the cache", async () => {
    const privateWork = join(work, 'private')
    mkdirSync(privateWork)
    const login = { username: 'alice', password: `pw-${process.pid}` }
    const locked = await startRegistry(privateWork, login)
    try {
      const pushed = locked.push(busyboxRootfs(), 'private:1')
      const registry = `127.0.0.1:${locked.port}`
      const image = `${registry}/private:1`
      const name = `locked-${process.pid}`
      const without = await settle((await call('POST', '/v1/templates', { name, image })).body.build.id)
      assert.equal(without.error?.code, 'REGISTRY_AUTH_FAILED', JSON.stringify(without))
      await call('PUT', `/v1/registries/${registry}`, { username: 'alice', password: 'wrong' })
      const wrong = await settle((await call('POST', '/v1/templates', { name, image })).body.build.id)
      assert.equal(wrong.error?.code, 'REGISTRY_AUTH_FAILED', JSON.stringify(wrong))
      const put = await call('PUT', `/v1/registries/${registry}`, login)
      assert.equal(put.body.password, undefined)
      const right = await settle((await call('POST', '/v1/templates', { name, image })).body.build.id)
      assert.equal(right.status, 'ready', JSON.stringify(right))
      await using sbx = await Sandbox.create({ ...host().conn, template: name })
      assert.match((await sbx.exec(['busybox'])).stdout, /BusyBox/)
      // the image is in the pull cache now; another key without the login still may not have it
      const other = (await call('POST', '/v1/keys', { name: 'no-login' })).body.key
      const r = await call('POST', '/v1/templates', { name, image: `${registry}/private@${pushed}` }, other)
      const theirs = await settle(r.body.build.id, other)
      assert.equal(theirs.error?.code, 'REGISTRY_AUTH_FAILED', JSON.stringify(theirs))
      assert.ok(!JSON.stringify((await call('GET', '/v1/registries')).body).includes(login.password))
      assert.equal((await call('DELETE', `/v1/templates/${name}`)).status, 204)
    } finally {
      locked.stop()
    }
  })

  it("an image's own Env, WorkingDir and User: its template and a Dockerfile FROM it start from them", async () => {
    const root = join(work, 'configured')
    cpSync(busyboxRootfs(), root, { recursive: true, verbatimSymlinks: true })
    mkdirSync(join(root, 'opt/tool/bin'), { recursive: true })
    writeFileSync(join(root, 'opt/tool/bin/greet'), '#!/bin/sh\necho "hello $GREETING"\n', { mode: 0o755 })
    mkdirSync(join(root, 'etc'))
    writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\napp:x:1001:1001::/home/app:/bin/sh\n')
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\napp:x:1001:\n')
    for (const dir of ['srv', 'home/app']) {
      mkdirSync(join(root, dir), { recursive: true })
      chownSync(join(root, dir), 1001, 1001)
    }
    const image = `127.0.0.1:${port}/fbx-configured:1`
    const pushed = registry?.push(root, 'fbx-configured:1', {
      env: { GREETING: `hi-${process.pid}`, PATH: '/opt/tool/bin:/bin' },
      workdir: '/srv',
      user: 'app',
    })
    assert.ok(pushed, 'the registry is up')
    const name = `configured-${process.pid}`
    const fromImage = await settle((await call('POST', '/v1/templates', { name, image })).body.build.id)
    assert.equal(fromImage.status, 'ready', JSON.stringify(fromImage))
    {
      await using sbx = await Sandbox.create({ ...host().conn, template: name })
      const r = await sbx.exec('echo $GREETING; pwd; id -un; greet')
      assert.equal(r.stdout, `hi-${process.pid}\n/srv\napp\nhello hi-${process.pid}\n`, r.stderr)
    }
    // a RUN sees the image's env, working dir and user; ENV extends the image's PATH
    const dockerfile = `FROM ${image}\nRUN greet > from-run && id -un >> from-run\nENV PATH=/extra:$PATH\n`
    const built = await settle((await call('POST', '/v1/templates', { name: `${name}-df`, dockerfile })).body.build.id)
    assert.equal(built.status, 'ready', JSON.stringify(built))
    await using sbx = await Sandbox.create({ ...host().conn, template: `${name}-df` })
    assert.equal((await sbx.exec(['cat', '/srv/from-run'])).stdout, `hello hi-${process.pid}\napp\n`)
    assert.equal((await sbx.exec('echo $PATH; pwd; id -un')).stdout, '/extra:/opt/tool/bin:/bin\n/srv\napp\n')
    for (const n of [name, `${name}-df`]) assert.equal((await call('DELETE', `/v1/templates/${n}`)).status, 204)
    rmSync(pulledLayout(pushed), { recursive: true, force: true })
  })

  it('an uploaded image archive, `docker save` output or an OCI layout tarball, becomes a template', async () => {
    const layout = join(work, 'archive-layout')
    const greeting = `from-archive-${process.pid}`
    makeImageLayout(layout, busyboxRootfs(), { env: { GREETING: greeting }, workdir: '/bin' })
    const ociTar = join(work, 'oci-layout.tar')
    execFileSync('tar', ['-C', layout, '-cf', ociTar, '.'])
    const dockerTar = join(work, 'docker-save.tar')
    execFileSync('skopeo', ['copy', '--quiet', `oci:${layout}:t`, `docker-archive:${dockerTar}:fbx/archive:1`])
    const names: string[] = []
    const digests: string[] = []
    for (const [kind, archive] of [
      ['oci', ociTar],
      ['docker', dockerTar],
    ] as const) {
      const name = `archive-${kind}-${process.pid}`
      const lines: string[] = []
      const build = await Template.build({ ...host().conn, name, archive, onLog: (e) => lines.push(e.message) })
      assert.equal(build.status, 'ready')
      const imported = lines.find((l) => l.startsWith('image sha256:'))?.slice('image '.length)
      assert.ok(imported, `the log names the imported image: ${lines.join('\n')}`)
      assert.ok(existsSync(pulledLayout(imported)), 'kept in the pull cache under its digest')
      digests.push(imported)
      await using sbx = await Sandbox.create({ ...host().conn, template: name })
      const r = await sbx.exec('echo $GREETING; pwd; busybox | head -1')
      assert.match(r.stdout, new RegExp(`^${greeting}\n/bin\nBusyBox`), r.stderr)
      names.push(name)
    }
    // something else than an image archive fails the build with what it is not; the host carries on
    const notImage = join(work, 'not-an-image.tar')
    execFileSync('tar', ['-C', busyboxRootfs(), '-cf', notImage, 'bin/busybox'])
    await assert.rejects(
      Template.build({ ...host().conn, name: `archive-bad-${process.pid}`, archive: notImage }),
      (e: unknown) => {
        assert.ok(e instanceof TemplateBuildError, String(e))
        assert.equal(e.code, 'VALIDATION_FAILED')
        assert.match(e.message, /neither a `docker save` archive/)
        return true
      },
    )
    const truncated = join(work, 'truncated.tar')
    writeFileSync(truncated, readFileSync(ociTar).subarray(0, 20_000))
    await assert.rejects(
      Template.build({ ...host().conn, name: `archive-cut-${process.pid}`, archive: truncated }),
      (e: unknown) => e instanceof TemplateBuildError && e.code === 'VALIDATION_FAILED',
    )
    for (const name of names) assert.equal((await call('DELETE', `/v1/templates/${name}`)).status, 204)
    for (const d of digests) rmSync(pulledLayout(d), { recursive: true, force: true })
  })

  it('a second build of the same digest does not pull again (the registry is gone by then)', async () => {
    const before = statSync(pulledLayout(digest)).mtimeMs
    stopRegistry()
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-pinned` })
    assert.equal((await sbx.exec(['python3', '-c', 'print(6 * 7)'])).stdout, '42\n')
    assert.equal(statSync(pulledLayout(digest)).mtimeMs, before)
  })
})
