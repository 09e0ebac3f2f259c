// From the server's error to the SDK's typed class: every code the protocol has, thrown at the
// agent's edge and carried by the real server's error builder, must come back as exactly its class.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError, type ErrorCode, errorCodes, errorStatus } from '@forkbox/protocol'
import {
  AuthenticationError,
  ConflictError,
  ConnectionError,
  ForkboxClient,
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
  UnsupportedByServerError,
  ValidationError,
  VERSION,
} from '../src/index.ts'
import { useTestServer } from './server.ts'

const server = useTestServer({ maxSandboxes: 2, maxJsonBodyBytes: 64 * 1024 })

type ErrorClass = new (...args: never[]) => ForkboxError

// Written out per code (not derived from the status) so a code moving to another status, or a
// class mapping changing, fails here; a new code fails to compile until it is listed.
const expected = {
  VALIDATION_FAILED: ValidationError,
  INVALID_PATH: ValidationError,
  MALFORMED_JSON: ValidationError,
  UNAUTHENTICATED: AuthenticationError,
  FORBIDDEN: PermissionDeniedError,
  PERMISSION_DENIED: PermissionDeniedError,
  NOT_FOUND: NotFoundError,
  SANDBOX_NOT_FOUND: NotFoundError,
  TEMPLATE_NOT_FOUND: NotFoundError,
  KEY_NOT_FOUND: NotFoundError,
  SNAPSHOT_NOT_FOUND: NotFoundError,
  CONTEXT_NOT_FOUND: NotFoundError,
  PROCESS_NOT_FOUND: NotFoundError,
  FILE_NOT_FOUND: NotFoundError,
  PORT_NOT_EXPOSED: NotFoundError,
  EXEC_TIMEOUT: TimeoutError,
  SANDBOX_NOT_RUNNING: ConflictError,
  CANCELLED: ConflictError,
  FILE_EXISTS: ConflictError,
  NOT_A_DIRECTORY: ConflictError,
  IS_A_DIRECTORY: ConflictError,
  NOT_A_REGULAR_FILE: ConflictError,
  DIRECTORY_NOT_EMPTY: ConflictError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  RESOURCE_LIMIT_EXCEEDED: ForkboxError,
  EXEC_FAILED: ForkboxError,
  SANDBOX_ERRORED: SandboxErroredError,
  RATE_LIMITED: RateLimitError,
  QUOTA_EXCEEDED: RateLimitError,
  CONFLICT: ConflictError,
  NO_CAPACITY: ServiceUnavailableError,
  HOST_UNREACHABLE: ServiceUnavailableError,
  STORE_UNAVAILABLE: ServiceUnavailableError,
  SANDBOX_MOVING: ServiceUnavailableError,
  TEMPLATE_UNAVAILABLE: ServiceUnavailableError,
  NO_SPACE: InternalServerError,
  GUEST_ERROR: InternalServerError,
  PORT_UNREACHABLE: InternalServerError,
  CODE_RUNTIME_MISSING: ForkboxError,
  TEMPLATE_CONFLICT: ConflictError,
  IMAGE_NOT_FOUND: NotFoundError,
  REGISTRY_UNREACHABLE: InternalServerError,
  REGISTRY_AUTH_FAILED: InternalServerError,
  REGISTRY_NOT_ALLOWED: PermissionDeniedError,
  NOT_IMPLEMENTED: InternalServerError,
  BUILD_STEP_FAILED: ForkboxError,
  BUILD_TIMEOUT: TimeoutError,
  INTERNAL: InternalServerError,
} satisfies Record<ErrorCode, ErrorClass>

/** Exactly this class: `instanceof` alone would pass for ForkboxError whatever subclass came back. */
function assertClass(err: unknown, ErrorClass: ErrorClass): asserts err is ForkboxError {
  assert.ok(err instanceof ForkboxError, `not a ForkboxError: ${err}`)
  assert.equal(err.constructor, ErrorClass, `${err.constructor.name} instead of ${ErrorClass.name}`)
  assert.equal(err.name, ErrorClass.name)
}

describe('error mapping', () => {
  for (const code of errorCodes) {
    it(`${errorStatus[code]} ${code} → ${expected[code].name}`, async () => {
      const s = server()
      const sbx = await Sandbox.create({ ...s.conn(), maxRetries: 0 })
      s.agent.calls.exec = () => Promise.reject(new AppError(code, 'went wrong', { hint: 1 }))
      await assert.rejects(sbx.exec('true'), (err: unknown) => {
        assertClass(err, expected[code])
        assert.equal(err.code, code)
        assert.equal(err.status, errorStatus[code])
        assert.equal(err.message, 'went wrong')
        assert.match(err.requestId ?? '', /^req_/)
        assert.equal(err.details?.hint, 1)
        return true
      })
    })
  }
})

describe('errors the server makes on its own', () => {
  async function rejection(promise: Promise<unknown>): Promise<ForkboxError> {
    try {
      await promise
    } catch (err) {
      assert.ok(err instanceof ForkboxError, String(err))
      return err
    }
    assert.fail('did not reject')
  }

  it('a request that does not validate: ValidationError', async () => {
    const err = await rejection(Sandbox.create({ ...server().conn(), ttlSeconds: -1 }))
    assertClass(err, ValidationError)
    assert.equal(err.code, 'VALIDATION_FAILED')
  })

  it('a wrong key: AuthenticationError', async () => {
    const err = await rejection(Sandbox.list({ ...server().conn(), apiKey: 'fbx_wrong' }))
    assertClass(err, AuthenticationError)
    assert.equal(err.status, 401)
  })

  it('a tenant key at an admin route: PermissionDeniedError', async () => {
    const s = server()
    const tenant = (await s.cp.keys.create({ name: 'tenant' })).key
    const err = await rejection(new ForkboxClient({ ...s.conn(), apiKey: tenant }).keys.list())
    assertClass(err, PermissionDeniedError)
    assert.equal(err.code, 'FORBIDDEN')
  })

  it('an unknown sandbox: NotFoundError with the request id the server logged', async () => {
    const s = server()
    const err = await rejection(Sandbox.connect('sbx-nope', s.conn()))
    assertClass(err, NotFoundError)
    assert.equal(err.code, 'SANDBOX_NOT_FOUND')
    assert.match(err.requestId ?? '', /^req_[0-9a-f]{16}$/)
  })

  it('an exec on a killed sandbox: ConflictError', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    await sbx.kill()
    const err = await rejection(sbx.exec('true'))
    assertClass(err, ConflictError)
    assert.equal(err.code, 'SANDBOX_NOT_RUNNING')
  })

  it('a sandbox that died by itself: SandboxErroredError with the reason', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    s.agent.die(sbx.id, 'out_of_memory')
    const err = await rejection(sbx.exec('true'))
    assertClass(err, SandboxErroredError)
    assert.equal(err.status, 410)
    assert.equal(err instanceof SandboxErroredError && err.reason, 'out_of_memory')
  })

  it('a body over the limit: PayloadTooLargeError', async () => {
    const s = server()
    const sbx = await Sandbox.create(s.conn())
    const err = await rejection(sbx.exec('cat', { stdin: 'x'.repeat(128 * 1024) }))
    assertClass(err, PayloadTooLargeError)
  })

  it('no room for another sandbox: ServiceUnavailableError', async () => {
    const s = server()
    await Sandbox.create(s.conn())
    await Sandbox.create(s.conn())
    const err = await rejection(Sandbox.create({ ...s.conn(), maxRetries: 0 }))
    assertClass(err, ServiceUnavailableError)
    assert.equal(err.code, 'NO_CAPACITY')
  })

  it('a route the server does not have: NotFoundError NOT_FOUND', async () => {
    const s = server()
    const res = await s.fetch(`${s.url}/v1/no-such-route`, { headers: { authorization: `Bearer ${s.apiKey}` } })
    assert.equal(res.status, 404)
    assert.equal((await res.json()).error.code, 'NOT_FOUND')
  })
})

describe('a server older than the SDK', () => {
  it('a call the server has no route for is UNSUPPORTED_BY_SERVER, naming the call and both versions', async () => {
    const s = server()
    // the real server, one of whose routes this "older" server lacks
    const older: typeof fetch = (input, init) =>
      s.fetch(String(input).replace('/v1/sandboxes/x', '/v1/sandboxes-of-the-future/x'), init)
    const err = await Sandbox.connect('x', { ...s.conn(), fetch: older }).catch((e: unknown) => e)
    assertClass(err, UnsupportedByServerError)
    assert.ok(err instanceof NotFoundError, 'still the 404 it was')
    assert.equal(err.code, 'UNSUPPORTED_BY_SERVER')
    assert.equal((err as UnsupportedByServerError).serverVersion, VERSION)
    assert.equal(
      err.message,
      `this server (forkbox ${VERSION}) does not serve GET /v1/sandboxes/x, which this SDK (${VERSION}) calls: upgrade the server`,
    )
    // one from before versions were reported: no header, no details, the message only
    const ancient: typeof fetch = async () =>
      Response.json({ error: { code: 'NOT_FOUND', message: 'no route GET /v1/sandboxes/x' } }, { status: 404 })
    const old = await Sandbox.connect('x', { ...s.conn(), fetch: ancient }).catch((e: unknown) => e)
    assertClass(old, UnsupportedByServerError)
    assert.equal((old as UnsupportedByServerError).serverVersion, undefined)
    assert.match(old.message, /^this server \(a forkbox older than 0\.1\.0\) does not serve GET \/v1\/sandboxes\/x/)
    // a 404 for a thing, not a route, stays what it was
    const missing = await Sandbox.connect('sbx-nope', s.conn()).catch((e: unknown) => e)
    assertClass(missing, NotFoundError)
    assert.equal(missing.code, 'SANDBOX_NOT_FOUND')
  })
})

describe('responses the server never sends as such', () => {
  it('keeps the status class and the header request id for a non-JSON body', async () => {
    const s = server()
    const proxy: typeof fetch = async () =>
      new Response('<html>bad gateway</html>', { status: 404, headers: { 'x-request-id': 'r9' } })
    const err = await Sandbox.connect('x', { ...s.conn(), fetch: proxy }).catch((e: unknown) => e)
    assertClass(err, NotFoundError)
    assert.equal(err.code, 'UNEXPECTED_RESPONSE')
    assert.equal(err.requestId, 'r9')
    assert.match(err.message, /HTTP 404: <html>bad gateway/)
  })

  it('passes an unknown code from a newer server through', async () => {
    const s = server()
    s.faults.push({ status: 409, code: 'SOMETHING_NEW' as ErrorCode })
    const err = await Sandbox.connect('x', s.conn()).catch((e: unknown) => e)
    assertClass(err, ConflictError)
    assert.equal(err.code, 'SOMETHING_NEW')
  })

  it('wraps a network failure in ConnectionError', async () => {
    const s = server()
    s.faults.push({ refuse: true })
    const err = await Sandbox.create(s.conn()).catch((e: unknown) => e)
    assertClass(err, ConnectionError)
    assert.equal(err.code, 'CONNECTION_ERROR')
    assert.equal(err.status, undefined)
    assert.match(err.message, /ECONNREFUSED/)
  })

  it('rethrows an abort as the abort reason, not a ForkboxError', async () => {
    const s = server()
    s.faults.push({ hang: true })
    const controller = new AbortController()
    const pending = Sandbox.connect('x', { ...s.conn(), signal: controller.signal })
    controller.abort()
    await assert.rejects(pending, (err: unknown) => {
      assert.ok(!(err instanceof ForkboxError))
      assert.equal((err as Error).name, 'AbortError')
      return true
    })
  })
})
