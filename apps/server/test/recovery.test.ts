// What a restarted control plane makes of its sandboxes (services/sandbox-recovery.ts).
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { createControlPlane } from '../src/index.ts'
import { agent, call, cp, dir, setAgent, setControlPlane, useControlPlane } from './app-harness.ts'
import { FakeAgent } from './fake-agent.ts'

describe('restart recovery', () => {
  useControlPlane()

  it('after a restart, re-attached sandboxes run on; the rest are lost; strays are stopped', async () => {
    const kept = (await call('POST', '/v1/sandboxes', {})).body
    const lost = (await call('POST', '/v1/sandboxes', {})).body
    const killed = (await call('POST', '/v1/sandboxes', {})).body
    await call('DELETE', `/v1/sandboxes/${killed.id}`)
    await cp.close()
    // the new agent process found `kept` (and `killed`, whose stop the crash cut short) still running
    setAgent(new FakeAgent())
    agent.adopt(kept.id)
    agent.adopt(killed.id)
    setControlPlane(await createControlPlane({ agent, config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent' } }))
    assert.equal((await call('GET', `/v1/sandboxes/${kept.id}`)).body.state, 'running')
    assert.equal((await call('POST', `/v1/sandboxes/${kept.id}/exec`, { cmd: 'true' })).status, 200)
    const got = await call('GET', `/v1/sandboxes/${lost.id}`)
    assert.deepEqual([got.body.state, got.body.errorReason], ['errored', 'lost'])
    assert.deepEqual(agent.stopped, [killed.id])
    const events = (await call('GET', `/v1/sandboxes/${kept.id}/events`)).body.events.map(
      (e: { type: string }) => e.type,
    )
    assert.ok(events.includes('re-attached'), events.join(','))
  })
})
