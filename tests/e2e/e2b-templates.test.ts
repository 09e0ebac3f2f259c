// The published `e2b` client's `Template` builder against a real forkbox on real runsc: a template
// from a Debian image in a local registry (Debian's docker-registry) is built through E2B's v3/v2 routes,
// its log streamed to onBuildLogs, and `Sandbox.create(alias)` runs a command in it.
import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { BuildError, type LogEntry, Sandbox, Template } from 'e2b'
import { issueE2bKey, sharedTemplatesDir, useTestHost } from './harness.ts'
import { baseRootfs, TestRegistry } from './registry.ts'

const work = mkdtempSync(join(tmpdir(), 'forkbox-e2e-e2b-tpl-'))
const registry = new TestRegistry(work)
let digest = ''
let key = ''

const host = useTestHost({
  async setup(t) {
    key = await issueE2bKey(t, 'e2b-templates')
  },
  options: () => ({ poolSize: 0 }),
})

before(async () => {
  await registry.start()
  digest = registry.push(baseRootfs(), 'fbx-e2b-debian:1')
})

after(() => {
  registry.stop()
  if (digest) rmSync(join(sharedTemplatesDir, '.oci', digest.replace(':', '-')), { recursive: true, force: true })
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
})
