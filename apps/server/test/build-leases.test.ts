// Replicas sharing a store: a build whose replica went away (its lease on the build no longer
// renewed) is failed by the leader; one whose replica lives is left alone.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { TemplateService } from '../src/services/templates.ts'
import { openStore } from '../src/store/db.ts'
import { KeyStore } from '../src/store/keys.ts'
import { TemplateStore } from '../src/store/templates.ts'
import { FakeAgent } from './fake-agent.ts'

const dir = mkdtempSync(join(tmpdir(), 'fbx-leases-'))
after(() => rmSync(dir, { recursive: true, force: true }))

describe('build leases', () => {
  it("the leader fails a build whose replica stopped renewing its lease, never a live replica's", async () => {
    const store = await openStore({ path: join(dir, 'db.sqlite') })
    const service = (agent: FakeAgent) =>
      new TemplateService({
        store: new TemplateStore(store.db),
        agent,
        log: pino({ level: 'silent' }),
        limits: {
          maxConcurrentBuilds: 2,
          maxContextBytes: 1024,
          contextsDir: join(dir, 'contexts'),
          ceilingTemplate: 'base',
        },
      })
    const agent = new FakeAgent()
    let release!: () => void
    agent.buildGate = new Promise((r) => {
      release = r
    })
    const a = service(agent)
    const leader = service(new FakeAgent())
    const owner = (await new KeyStore(store.db).create({ name: 'builder' })).id
    try {
      const { build } = await a.create(owner, { name: 'leased', image: 'registry.local/x:1' })
      for (let i = 0; i < 100 && (await a.getBuild({ keyId: owner }, build.id)).status !== 'building'; i++)
        await new Promise((r) => setTimeout(r, 10))
      assert.equal((await a.getBuild({ keyId: owner }, build.id)).status, 'building')
      // replica `a` lives (its lease is fresh): the leader leaves its build alone
      await leader.failLapsed()
      assert.equal((await a.getBuild({ keyId: owner }, build.id)).status, 'building')
      // `a` goes quiet past its lease, as a replica killed mid-build does
      await store.db
        .updateTable('template_builds')
        .set({ lease_until: new Date(Date.now() - 1000).toISOString() })
        .where('id', '=', build.id)
        .execute()
      await leader.failLapsed()
      const failed = await leader.getBuild({ keyId: owner }, build.id)
      assert.equal(failed.status, 'failed')
      assert.match(failed.error?.message ?? '', /replica .* went away/)
    } finally {
      release()
      await a.drain()
      await leader.drain()
      await store.close()
    }
  })
})
