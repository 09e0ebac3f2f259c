// Bad input gets a stable error code, loses nothing, and the server keeps serving.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AuthenticationError, ConflictError, NotFoundError, Sandbox, ValidationError } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost({
  setup: async (t) => {
    sbx = await Sandbox.create({ ...t.conn })
    await sbx.files.write('/work/keep.txt', 'still here')
  },
  teardown: async () => {
    await sbx.kill()
  },
})
let sbx: Sandbox

async function raw(path: string, init: RequestInit = {}): Promise<{ status: number; code: string | undefined }> {
  const res = await fetch(`${host().conn.url}${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${host().conn.apiKey}`,
      'content-type': 'application/json',
      ...(init.headers ?? {}),
    },
  })
  const body = (await res.json().catch(() => ({}))) as { error?: { code: string; requestId: string } }
  if (res.status >= 400) assert.match(body.error?.requestId ?? '', /^req_/)
  return { status: res.status, code: body.error?.code }
}

describe('bad input', () => {
  it('unknown template', async () => {
    await assert.rejects(Sandbox.create({ ...host().conn, template: 'no-such-template' }), (e: unknown) => {
      assert.ok(e instanceof NotFoundError)
      assert.equal(e.code, 'TEMPLATE_NOT_FOUND')
      return true
    })
  })

  it('malformed JSON, unknown fields and wrong types', async () => {
    assert.deepEqual(await raw('/v1/sandboxes', { method: 'POST', body: '{"template": ' }), {
      status: 400,
      code: 'MALFORMED_JSON',
    })
    assert.deepEqual(await raw('/v1/sandboxes', { method: 'POST', body: '{"tempalte": "base"}' }), {
      status: 400,
      code: 'VALIDATION_FAILED',
    })
    assert.deepEqual(await raw(`/v1/sandboxes/${sbx.id}/exec`, { method: 'POST', body: '{"cmd": 42}' }), {
      status: 400,
      code: 'VALIDATION_FAILED',
    })
    assert.deepEqual(await raw('/v1/sandboxes', { method: 'POST', body: '{"ttlSeconds": -5}' }), {
      status: 400,
      code: 'VALIDATION_FAILED',
    })
  })

  it('paths with .. or NUL', async () => {
    for (const path of ['/work/../etc/passwd', '../x', '/work/a\0b']) {
      await assert.rejects(
        sbx.files.read(path),
        (e: unknown) => e instanceof ValidationError && e.code === 'INVALID_PATH',
      )
      await assert.rejects(
        sbx.files.write(path, 'x'),
        (e: unknown) => e instanceof ValidationError && e.code === 'INVALID_PATH',
      )
    }
  })

  it('oversize bodies', async () => {
    const huge = JSON.stringify({ cmd: 'cat', stdin: 'x'.repeat(30 * 1024 * 1024) })
    assert.deepEqual(await raw(`/v1/sandboxes/${sbx.id}/exec`, { method: 'POST', body: huge }), {
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
    })
  })

  it('resources above the template maximum', async () => {
    await assert.rejects(Sandbox.create({ ...host().conn, resources: { memoryMB: 1024 * 1024 } }), (e: unknown) => {
      return (
        (e as { code?: string }).code === 'RESOURCE_LIMIT_EXCEEDED' ||
        (e as { code?: string }).code === 'VALIDATION_FAILED'
      )
    })
  })

  it('exec on a killed sandbox', async () => {
    const dead = await Sandbox.create({ ...host().conn })
    await dead.kill()
    await assert.rejects(
      dead.exec(['true']),
      (e: unknown) => e instanceof ConflictError && e.code === 'SANDBOX_NOT_RUNNING',
    )
    await assert.rejects(dead.files.read('/work/x'), (e: unknown) => e instanceof ConflictError)
    await dead.kill() // idempotent
  })

  it('wrong or missing key', async () => {
    await assert.rejects(Sandbox.list({ url: host().conn.url, apiKey: 'fbx_wrong' }), AuthenticationError)
    const res = await fetch(`${host().conn.url}/v1/sandboxes`)
    assert.equal(res.status, 401)
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED')
    assert.equal((await fetch(`${host().conn.url}/healthz`)).status, 200)
  })

  it('unknown sandbox id and route', async () => {
    await assert.rejects(Sandbox.connect('sbx-00000000000000000000', host().conn), NotFoundError)
    assert.deepEqual(await raw('/v1/nothing-here'), { status: 404, code: 'NOT_FOUND' })
  })

  it('after all of it the server and the sandbox still serve, and nothing was lost', async () => {
    assert.equal(await sbx.files.read('/work/keep.txt'), 'still here')
    assert.equal((await sbx.exec(['echo', 'ok'])).stdout, 'ok\n')
    const doc = (await (
      await fetch(`${host().conn.url}/openapi.json`, { headers: { authorization: `Bearer ${host().conn.apiKey}` } })
    ).json()) as {
      openapi: string
      paths: Record<string, unknown>
    }
    assert.equal(doc.openapi, '3.1.0')
    assert.ok(doc.paths['/v1/sandboxes/{id}/exec'])
  })
})
