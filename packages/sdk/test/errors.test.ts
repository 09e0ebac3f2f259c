import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  AuthenticationError,
  ConflictError,
  ConnectionError,
  ForkboxError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitError,
  Sandbox,
  SandboxErroredError,
  ServiceUnavailableError,
  TimeoutError,
  ValidationError,
} from '../src/index.ts'
import { conn, errorResponse, fakeFetch, json, sandboxInfo } from './fake-fetch.ts'

const cases = [
  [400, 'VALIDATION_FAILED', ValidationError],
  [400, 'INVALID_PATH', ValidationError],
  [401, 'UNAUTHENTICATED', AuthenticationError],
  [403, 'FORBIDDEN', PermissionDeniedError],
  [404, 'SANDBOX_NOT_FOUND', NotFoundError],
  [408, 'EXEC_TIMEOUT', TimeoutError],
  [409, 'SANDBOX_NOT_RUNNING', ConflictError],
  [413, 'PAYLOAD_TOO_LARGE', PayloadTooLargeError],
  [429, 'RATE_LIMITED', RateLimitError],
  [503, 'NO_CAPACITY', ServiceUnavailableError],
  [500, 'INTERNAL', InternalServerError],
  [502, 'GUEST_ERROR', InternalServerError],
  [422, 'EXEC_FAILED', ForkboxError],
] as const

describe('error mapping', () => {
  for (const [status, code, ErrorClass] of cases) {
    it(`${status} ${code} → ${ErrorClass.name}`, async () => {
      const fake = fakeFetch(() => errorResponse(status, code, 'went wrong', { hint: 1 }))
      await assert.rejects(Sandbox.connect('sbx_1', { ...conn(fake), maxRetries: 0 }), (err: unknown) => {
        assert.ok(err instanceof ErrorClass)
        assert.ok(err instanceof ForkboxError)
        assert.equal(err.name, ErrorClass.name)
        assert.equal(err.code, code)
        assert.equal(err.status, status)
        assert.equal(err.message, 'went wrong')
        assert.equal(err.requestId, 'req_123')
        assert.deepEqual(err.details, { hint: 1 })
        return true
      })
    })
  }

  it('SANDBOX_ERRORED exposes the reason', async () => {
    const fake = fakeFetch((req) =>
      req.method === 'GET'
        ? json(200, sandboxInfo())
        : errorResponse(410, 'SANDBOX_ERRORED', 'oom', { reason: 'out_of_memory' }),
    )
    const sbx = await Sandbox.connect('sbx_1', conn(fake))
    await assert.rejects(sbx.exec('true'), (err: unknown) => {
      assert.ok(err instanceof SandboxErroredError)
      assert.equal(err.reason, 'out_of_memory')
      assert.equal(err.status, 410)
      return true
    })
  })

  it('keeps the status class and the header request id for a non-JSON body', async () => {
    const fake = fakeFetch(
      () => new Response('<html>bad gateway</html>', { status: 404, headers: { 'x-request-id': 'r9' } }),
    )
    await assert.rejects(Sandbox.connect('x', conn(fake)), (err: unknown) => {
      assert.ok(err instanceof NotFoundError)
      assert.equal(err.code, 'UNEXPECTED_RESPONSE')
      assert.equal(err.requestId, 'r9')
      assert.match(err.message, /HTTP 404: <html>bad gateway/)
      return true
    })
  })

  it('passes an unknown code from a newer server through', async () => {
    const fake = fakeFetch(() => errorResponse(409, 'SOMETHING_NEW'))
    await assert.rejects(Sandbox.connect('x', conn(fake)), (err: unknown) => {
      assert.ok(err instanceof ConflictError)
      assert.equal(err.code, 'SOMETHING_NEW')
      return true
    })
  })

  it('wraps a network failure in ConnectionError', async () => {
    const fake = fakeFetch(() => {
      throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:7411') })
    })
    await assert.rejects(Sandbox.create({ ...conn(fake) }), (err: unknown) => {
      assert.ok(err instanceof ConnectionError)
      assert.equal(err.code, 'CONNECTION_ERROR')
      assert.equal(err.status, undefined)
      assert.match(err.message, /ECONNREFUSED/)
      return true
    })
  })

  it('rethrows an abort as the abort reason, not a ForkboxError', async () => {
    const controller = new AbortController()
    const fake = fakeFetch(() => new Promise<Response>(() => {}))
    const fetchWithSignal: typeof fetch = (input, init) => {
      void fake.fetch(input, init)
      return new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)))
    }
    const pending = Sandbox.connect('x', { ...conn(fake), fetch: fetchWithSignal, signal: controller.signal })
    controller.abort()
    await assert.rejects(pending, (err: unknown) => {
      assert.ok(!(err instanceof ForkboxError))
      assert.equal((err as Error).name, 'AbortError')
      return true
    })
  })
})
