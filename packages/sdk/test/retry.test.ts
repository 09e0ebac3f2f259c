import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConnectionError, InternalServerError, RateLimitError, Sandbox, ServiceUnavailableError } from '../src/index.ts'
import { useTestServer } from './server.ts'

const server = useTestServer()
const busy = { status: 503, code: 'NO_CAPACITY', retryAfterSeconds: 0 } as const
const limited = { status: 429, code: 'RATE_LIMITED', retryAfterSeconds: 0 } as const
const refused = { refuse: true } as const

describe('retries', () => {
  it('retries 503 and then succeeds, even for POST', async () => {
    const s = server()
    s.faults.push(busy)
    const sbx = await Sandbox.create(s.conn())
    assert.equal(sbx.info.state, 'running')
    assert.deepEqual(
      s.requests.map((r) => r.method),
      ['POST', 'POST'],
    )
    assert.equal(s.agent.started.length, 1)
  })

  it('gives up on 429 after two retries', async () => {
    const s = server()
    s.faults.push(limited, limited, limited)
    await assert.rejects(Sandbox.list(s.conn()), RateLimitError)
    assert.equal(s.requests.length, 3)
  })

  it('does not retry a quota (a 429 without Retry-After)', async () => {
    const s = server()
    s.faults.push({ status: 429, code: 'QUOTA_EXCEEDED' }, limited)
    await assert.rejects(Sandbox.list(s.conn()), (e: RateLimitError) => e.code === 'QUOTA_EXCEEDED')
    assert.equal(s.requests.length, 1)
  })

  it('honours maxRetries', async () => {
    const s = server()
    s.faults.push(busy)
    await assert.rejects(Sandbox.list({ ...s.conn(), maxRetries: 0 }), ServiceUnavailableError)
    assert.equal(s.requests.length, 1)
  })

  it('never retries other errors', async () => {
    const s = server()
    s.faults.push({ status: 500, code: 'INTERNAL' })
    await assert.rejects(Sandbox.list(s.conn()), InternalServerError)
    assert.equal(s.requests.length, 1)
  })

  it('retries connection errors on GET and DELETE', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    s.faults.push(refused)
    assert.deepEqual(
      (await Sandbox.list(s.conn())).map((i) => i.id),
      [sbx.id],
    )
    s.faults.push(refused, refused)
    await Sandbox.kill(sbx.id, s.conn())
    assert.deepEqual(s.agent.stopped, [sbx.id])
    assert.deepEqual(
      s.requests.map((r) => r.method),
      ['POST', 'GET', 'GET', 'DELETE', 'DELETE', 'DELETE'],
    )
  })

  it('does not retry connection errors on POST', async () => {
    const s = server()
    s.faults.push(refused)
    await assert.rejects(Sandbox.create(s.conn()), ConnectionError)
    assert.equal(s.requests.length, 1)
    assert.equal(s.agent.started.length, 0)
  })

  it('stops backing off when the signal aborts', async () => {
    const s = server()
    s.faults.push({ ...busy, retryAfterSeconds: 5 })
    const controller = new AbortController()
    const started = Date.now()
    const pending = Sandbox.list({ ...s.conn(), signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await assert.rejects(pending, { name: 'AbortError' })
    assert.ok(Date.now() - started < 2000)
    assert.equal(s.requests.length, 1)
  })
})
