import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConnectionError, InternalServerError, RateLimitError, Sandbox, ServiceUnavailableError } from '../src/index.ts'
import { conn, errorResponse, fakeFetch, json, sandboxInfo } from './fake-fetch.ts'

const noWait = { 'retry-after': '0' }
const refused = () => {
  throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') })
}

describe('retries', () => {
  it('retries 503 and then succeeds, even for POST', async () => {
    const fake = fakeFetch((_req, n) =>
      n === 0 ? errorResponse(503, 'NO_CAPACITY', 'full', undefined, noWait) : json(201, sandboxInfo()),
    )
    const sbx = await Sandbox.create(conn(fake))
    assert.equal(sbx.id, 'sbx_1')
    assert.equal(fake.requests.length, 2)
    assert.deepEqual(
      fake.requests.map((r) => r.method),
      ['POST', 'POST'],
    )
  })

  it('gives up on 429 after two retries', async () => {
    const fake = fakeFetch(() => errorResponse(429, 'RATE_LIMITED', 'slow down', undefined, noWait))
    await assert.rejects(Sandbox.list(conn(fake)), RateLimitError)
    assert.equal(fake.requests.length, 3)
  })

  it('honours maxRetries', async () => {
    const fake = fakeFetch(() => errorResponse(503, 'NO_CAPACITY', 'full', undefined, noWait))
    await assert.rejects(Sandbox.list({ ...conn(fake), maxRetries: 0 }), ServiceUnavailableError)
    assert.equal(fake.requests.length, 1)
  })

  it('never retries other errors', async () => {
    const fake = fakeFetch(() => errorResponse(500, 'INTERNAL'))
    await assert.rejects(Sandbox.list(conn(fake)), InternalServerError)
    assert.equal(fake.requests.length, 1)
  })

  it('retries connection errors on GET and DELETE', async () => {
    let calls = 0
    const fake = fakeFetch(() => json(200, { sandboxes: [] }))
    const flaky: typeof fetch = (input, init) => (calls++ === 0 ? refused() : fake.fetch(input, init))
    assert.deepEqual(await Sandbox.list({ ...conn(fake), fetch: flaky }), [])
    assert.equal(calls, 2)

    calls = 0
    const flakyDelete: typeof fetch = () =>
      calls++ < 2 ? refused() : Promise.resolve(new Response(null, { status: 204 }))
    await Sandbox.kill('sbx_1', { ...conn(fake), fetch: flakyDelete })
    assert.equal(calls, 3)
  })

  it('does not retry connection errors on POST', async () => {
    let calls = 0
    const failing: typeof fetch = () => {
      calls++
      return refused()
    }
    await assert.rejects(Sandbox.create({ apiKey: 'k', url: 'http://x.test', fetch: failing }), ConnectionError)
    assert.equal(calls, 1)
  })

  it('stops backing off when the signal aborts', async () => {
    const controller = new AbortController()
    const fake = fakeFetch(() => errorResponse(503, 'NO_CAPACITY', 'full', undefined, { 'retry-after': '5' }))
    const started = Date.now()
    const pending = Sandbox.list({ ...conn(fake), signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await assert.rejects(pending, { name: 'AbortError' })
    assert.ok(Date.now() - started < 2000)
    assert.equal(fake.requests.length, 1)
  })
})
