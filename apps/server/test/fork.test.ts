// Forks through the HTTP app over a fake agent: what the records say when a fork fails part way,
// or when the source's checkpoint fails before any fork starts.
import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import type { ControlPlane } from '../src/index.ts'
import { fakeControlPlane, type TestControlPlane } from './control-plane.ts'
import type { FakeAgent } from './fake-agent.ts'

let agent: FakeAgent
let cp: ControlPlane

async function call(method: string, path: string, body?: unknown) {
  const res = await cp.app.request(path, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${cp.bootstrapKey}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: await res.json() }
}

async function states(except: string): Promise<string[]> {
  const all = (await call('GET', '/v1/sandboxes')).body.sandboxes as { id: string; state: string }[]
  return all
    .filter((s) => s.id !== except)
    .map((s) => s.state)
    .sort()
}

let plane: TestControlPlane

beforeEach(async () => {
  plane = await fakeControlPlane('fork')
  ;({ cp, agent } = plane)
})

afterEach(() => plane.close())

describe('fork', () => {
  it('part way: each fork that failed is errored, each that started is killed', async () => {
    const src = (await call('POST', '/v1/sandboxes', {})).body.id as string
    agent.failAfter = 2
    const r = await call('POST', `/v1/sandboxes/${src}/fork`, { count: 4 })
    assert.equal(r.status, 500)
    assert.deepEqual(await states(src), ['errored', 'errored', 'killed', 'killed'])
    assert.deepEqual(agent.stopped.length, 2)
  })

  it('a failed checkpoint of the source leaves no fork recorded', async () => {
    const src = (await call('POST', '/v1/sandboxes', {})).body.id as string
    agent.snapshot = async () => {
      throw new AppError('INTERNAL', 'checkpoint failed')
    }
    const r = await call('POST', `/v1/sandboxes/${src}/fork`, { count: 2 })
    assert.equal(r.status, 500)
    assert.deepEqual(await states(src), [])
    assert.equal((await call('GET', `/v1/sandboxes/${src}`)).body.state, 'running')
  })
})
