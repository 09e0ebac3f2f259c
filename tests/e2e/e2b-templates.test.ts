// The published `e2b` client's `Template` builder against a real forkbox on real runsc: a template
// from a Debian image in a local registry (Debian's docker-registry) is built through E2B's v3/v2 routes,
// its log streamed to onBuildLogs, and `Sandbox.create(alias)` runs a command in it.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { BuildError, type LogEntry, Sandbox, Template, waitForPort } from 'e2b'
import { issueE2bKey, sharedTemplatesDir, useTestHost } from './harness.ts'
import { baseRootfs, pulledLayout, startRegistry, type TestRegistry } from './registry.ts'

const work = mkdtempSync(join(tmpdir(), 'forkbox-e2e-e2b-tpl-'))
let registry: TestRegistry
let digest = ''
let key = ''

const host = useTestHost({
  async setup(t) {
    key = await issueE2bKey(t, 'e2b-templates')
  },
  // the test's registry is on loopback: only an operator's allow-list lets pulls reach it
  options: () => ({ poolSize: 0, registryAllow: ['127.0.0.1'] }),
})

before(async () => {
  registry = await startRegistry(work)
  digest = registry.push(baseRootfs(), 'fbx-e2b-debian:1')
})

after(() => {
  registry?.stop()
  if (digest) rmSync(pulledLayout(digest), { recursive: true, force: true })
  rmSync(work, { recursive: true, force: true })
})

describe('the e2b Template builder on real sandboxes', () => {
  it('builds fromImage from the local registry, streams its log, and Sandbox.create(alias) runs in it', async () => {
    const conn = { apiKey: key, apiUrl: host().conn.url }
    const name = `e2b-deb-${process.pid}`
    const logs: LogEntry[] = []
    const image = `127.0.0.1:${registry.port}/fbx-e2b-debian:1`
    const info = await Template.build(Template().fromImage(image), name, {
      ...conn,
      onBuildLogs: (e) => logs.push(e),
    })
    assert.equal(info.templateId, name)
    const messages = logs.map((l) => l.message)
    assert.ok(
      messages.some((m) => /^ready in /.test(m)),
      messages.join('\n'),
    )
    assert.ok(
      messages.some((m) => /bake/.test(m)),
      messages.join('\n'),
    )
    assert.equal(await Template.exists(name, conn), true)

    const sbx = await Sandbox.create(name, { ...conn, sandboxUrl: conn.apiUrl, timeoutMs: 120_000 })
    try {
      const r = await sbx.commands.run('. /etc/os-release; echo "$PRETTY_NAME"; id -un; pwd')
      assert.match(r.stdout, /^Debian GNU\/Linux 12 .*\nuser\n\/home\/user\n$/, JSON.stringify(r))
    } finally {
      await sbx.kill()
    }

    // a bad image fails the build: the client's BuildError, with the registry's answer
    await assert.rejects(
      Template.build(Template().fromImage(`127.0.0.1:${registry.port}/fbx-e2b-debian:nope`), `${name}-bad`, conn),
      (e: unknown) => e instanceof BuildError && /fbx-e2b-debian:nope/.test(e.message),
    )

    // deleted through E2B's DELETE /templates/{name}: its rootfs and snapshot go (no sandbox uses them)
    const own = await fetch(`${conn.apiUrl}/v1/templates/${name}`, { headers: { authorization: `Bearer ${key}` } })
    const agentName = `u-${((await own.json()) as { id: string }).id.replace('tpl-', '')}-1`
    assert.ok(readdirSync(sharedTemplatesDir).some((n) => n.startsWith(`${agentName}-`)))
    for (const n of [name, `${name}-bad`]) {
      const del = await fetch(`${conn.apiUrl}/templates/${n}`, { method: 'DELETE', headers: { 'X-API-KEY': key } })
      assert.equal(del.status, 204)
    }
    assert.equal(await Template.exists(name, conn), false)
    assert.deepEqual(
      readdirSync(sharedTemplatesDir).filter((n) => n.startsWith(`${agentName}-`)),
      [],
    )
  })

  it('builds runCmd + copy + setEnvs + setWorkdir + setStartCmd(waitForPort): files, env, user, cwd, its server answers', async () => {
    const conn = { apiKey: key, apiUrl: host().conn.url }
    const context = join(work, 'site-context')
    mkdirSync(join(context, 'site'), { recursive: true })
    writeFileSync(join(context, 'site/index.html'), '<h1>forkbox</h1>\n')
    const name = `e2b-site-${process.pid}`
    const template = Template({ fileContextPath: context })
      .fromImage(`127.0.0.1:${registry.port}/fbx-e2b-debian:1`)
      .runCmd('echo built > /home/user/built.txt')
      .copy('site', '/home/user/site')
      .setEnvs({ GREETING: 'hello from e2b' })
      .setWorkdir('/home/user/site')
      .setStartCmd('python3 -m http.server 8000', waitForPort(8000))
    const logs: LogEntry[] = []
    const remove = () => fetch(`${conn.apiUrl}/templates/${name}`, { method: 'DELETE', headers: { 'X-API-KEY': key } })
    await Template.build(template, name, { ...conn, onBuildLogs: (e) => logs.push(e) })
    const messages = logs.map((l) => l.message)
    assert.ok(
      messages.some((m) => /^#\d+ RUN .*echo built/.test(m)),
      messages.join('\n'),
    )
    const sbx = await Sandbox.create(name, { ...conn, sandboxUrl: conn.apiUrl, timeoutMs: 120_000 })
    try {
      const fetchPage =
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/index.html').read().decode(), end='')\""
      const r = await sbx.commands.run(
        `cat /home/user/built.txt /home/user/site/index.html; echo "$GREETING"; id -un; pwd; ${fetchPage}`,
      )
      assert.equal(
        r.stdout,
        'built\n<h1>forkbox</h1>\nhello from e2b\nuser\n/home/user/site\n<h1>forkbox</h1>\n',
        JSON.stringify(r),
      )
    } finally {
      await sbx.kill()
      await remove()
    }

    // a failing step is the client's BuildError, pointing at that step's line of the template
    const failing = Template()
      .fromImage(`127.0.0.1:${registry.port}/fbx-e2b-debian:1`)
      .runCmd('echo about to fail; exit 3')
    await assert.rejects(Template.build(failing, `${name}-fails`, conn), (e: unknown) => {
      assert.ok(e instanceof BuildError, String(e))
      assert.match(e.message, /exit/, e.message)
      assert.match(e.stack ?? '', /e2b-templates\.test\.ts/)
      return true
    })
    await fetch(`${conn.apiUrl}/templates/${name}-fails`, { method: 'DELETE', headers: { 'X-API-KEY': key } })
  })
})
