// The REST API's edge in-process: keys and auth, input validation, signed file URLs, metrics,
// the OpenAPI document and the admin's reach over other keys.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import {
  CreateSandboxRequest,
  ExecRequest,
  ExecResult,
  Execution,
  errorCodes,
  FORKBOX_VERSION,
  ForkRequest,
  RunCodeRequest,
  Sandbox,
} from '@forkbox/protocol'
import { OpenAPIHono } from '@hono/zod-openapi'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import type { App, AppEnv } from '../src/http/env.ts'
import * as examples from '../src/http/examples.ts'
import { createControlPlane } from '../src/index.ts'
import { ROUTES } from '../src/routes/index.ts'
import { API_TAGS } from '../src/routes/tags.ts'
import { agent, call, cp, dir, key, setControlPlane, useControlPlane } from './app-harness.ts'

interface ErrorDoc {
  description: string
  content: Record<string, { example?: { error: { code: string } } }>
}

describe('api', () => {
  useControlPlane()

  it('makes one admin key on first start and none after', async () => {
    assert.match(key, /^fbx_[0-9a-f]{40}$/)
    await cp.close()
    setControlPlane(await createControlPlane({ agent, config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent' } }))
    assert.equal(cp.bootstrapKey, null)
  })

  it('requires a key everywhere but /healthz and /openapi.json', async () => {
    const health = await call('GET', '/healthz', undefined, null)
    assert.equal(health.status, 200)
    assert.deepEqual(health.body, { ok: true, version: FORKBOX_VERSION })
    const doc = await call('GET', '/openapi.json', undefined, null)
    assert.equal(doc.status, 200)
    assert.equal(doc.body.info.version, FORKBOX_VERSION)
    // every response says the server's version, errors included; a route it does not serve says so
    assert.equal(health.version, FORKBOX_VERSION)
    const unknown = await call('POST', '/v1/sandboxes/x/teleport', {})
    assert.equal(unknown.status, 404)
    assert.equal(unknown.version, FORKBOX_VERSION)
    assert.deepEqual(unknown.body.error.details, { noRoute: true })
    assert.match(unknown.body.error.message, /^no route POST \/v1\/sandboxes\/x\/teleport$/)
    const r = await call('GET', '/v1/sandboxes', undefined, null)
    assert.equal(r.status, 401)
    assert.equal(r.body.error.code, 'UNAUTHENTICATED')
    assert.equal(r.body.error.requestId, r.requestId)
    assert.equal((await call('GET', '/v1/sandboxes', undefined, 'fbx_nope')).status, 401)
  })

  it('validates input with stable codes', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    const cases: [string, string, unknown, number, string][] = [
      ['POST', '/v1/sandboxes', '{"template":', 400, 'MALFORMED_JSON'],
      ['POST', '/v1/sandboxes', { template: 'nope' }, 404, 'TEMPLATE_NOT_FOUND'],
      ['POST', '/v1/sandboxes', { ttlSeconds: 0 }, 400, 'VALIDATION_FAILED'],
      ['POST', '/v1/sandboxes', { envs: { 'bad name': 'x' } }, 400, 'VALIDATION_FAILED'],
      ['GET', `/v1/sandboxes/${s.body.id}/files?path=/a/../b`, undefined, 400, 'INVALID_PATH'],
      ['GET', `/v1/sandboxes/${s.body.id}/files?path=/a%00b`, undefined, 400, 'INVALID_PATH'],
      ['POST', `/v1/sandboxes/${s.body.id}/files/rename`, { from: '/a', to: '../b' }, 400, 'INVALID_PATH'],
      ['POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: [] }, 400, 'VALIDATION_FAILED'],
      ['GET', '/v1/nope', undefined, 404, 'NOT_FOUND'],
    ]
    for (const [m, p, b, status, code] of cases) {
      const r = await call(m, p, b)
      assert.deepEqual([r.status, r.body.error.code], [status, code], `${m} ${p}`)
    }
  })

  it('signs a file URL that works with no key, for its one sandbox, path, operation and user', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const made = await call('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: '/work/up.txt', operation: 'write' })
    assert.equal(made.status, 200)
    assert.ok(made.body.url.endsWith(made.body.path), made.body.url)
    assert.ok(Date.parse(made.body.expiresAt) - Date.now() > 3500_000)
    const put = (path: string, method = 'PUT') =>
      cp.app.request(path, { method, body: method === 'GET' ? undefined : 'hello' })
    const written = await put(made.body.path)
    assert.equal(written.status, 200)
    assert.equal(((await written.json()) as { size: number }).size, 5)
    assert.equal(written.headers.get('access-control-allow-origin'), '*')
    const preflight = await cp.app.request(made.body.path, { method: 'OPTIONS' })
    assert.equal(preflight.status, 204)
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /PUT/)
    // anything the signature does not cover is refused: another path, the other operation, another user
    const refused = async (path: string, method = 'PUT') => {
      const res = await put(path, method)
      assert.equal(res.status, 401, `${method} ${path}`)
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED')
    }
    await refused(made.body.path.replace('up.txt', 'other.txt'))
    await refused(made.body.path, 'GET')
    await refused(made.body.path.replace('path=', 'user=root&path='))
    await refused(made.body.path.replace(/expires=\d+/, 'expires=9999999999'))
    const { body: other } = await call('POST', '/v1/sandboxes', { template: 'base' })
    await refused(made.body.path.replace(sbx.id, other.id))
    // a signature on another route is not a credential there
    assert.equal((await cp.app.request(`/v1/sandboxes?signature=x`)).status, 401)
    const bad = await call('POST', `/v1/sandboxes/${sbx.id}/files/url`, { path: 'x', expiresInSeconds: 8 * 24 * 3600 })
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED')
    // revoking the owner's key voids its URLs
    const k2 = (await call('POST', '/v1/keys', { name: 'url-owner' })).body
    const { body: s2 } = await call('POST', '/v1/sandboxes', {}, k2.key)
    const u2 = (await call('POST', `/v1/sandboxes/${s2.id}/files/url`, { path: 'a', operation: 'write' }, k2.key)).body
    assert.equal((await put(u2.path)).status, 200)
    await call('DELETE', `/v1/keys/${k2.id}`)
    await refused(u2.path)
  })

  it('serves Prometheus metrics (admin only) whose counts match what happened', async () => {
    const a = (await call('POST', '/v1/sandboxes', {})).body
    await call('POST', '/v1/sandboxes', {})
    await call('DELETE', `/v1/sandboxes/${a.id}`)
    await call('POST', `/v1/sandboxes/${a.id}/exec`, { cmd: 'true' }) // 409: not running
    await call('GET', '/v1/sandboxes/sbx-nope') // 404
    const res = await cp.app.request('/metrics', { headers: { authorization: `Bearer ${key}` } })
    assert.equal(res.status, 200)
    const families = parsePrometheusTextFormat(await res.text()) as {
      name: string
      metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string> }[]
    }[]
    const family = (name: string) => families.find((f) => f.name === name)?.metrics ?? []
    const byState = Object.fromEntries(family('forkbox_sandboxes').map((m) => [m.labels?.state, Number(m.value)]))
    assert.deepEqual(byState, { killed: 1, running: 1 })
    const errors = Object.fromEntries(family('forkbox_api_errors_total').map((m) => [m.labels?.code, Number(m.value)]))
    assert.deepEqual(errors, { SANDBOX_NOT_RUNNING: 1, SANDBOX_NOT_FOUND: 1 })
    assert.equal(Number(family('forkbox_sandbox_create_seconds')[0]?.buckets?.['+Inf']), 2)
    assert.deepEqual(
      family('forkbox_pool_size').map((m) => [m.labels?.template, m.value]),
      [['base', '2']],
    )
    assert.equal(family('forkbox_sandbox_memory_bytes').length, 1)
    const other = await call('POST', '/v1/keys', { name: 'other' })
    const denied = await cp.app.request('/metrics', { headers: { authorization: `Bearer ${other.body.key}` } })
    assert.equal(denied.status, 403)
  })

  it('serves an OpenAPI 3.1 document covering every registered route', async () => {
    const doc = (await call('GET', '/openapi.json')).body as {
      openapi: string
      paths: Record<string, object>
      tags?: { name: string; description: string }[]
    }
    assert.equal(doc.openapi, '3.1.0')
    // what the route list serves, read off a bare app it registers on (not off the document)
    const bare: App = new OpenAPIHono<AppEnv>()
    for (const r of ROUTES) r.register(bare)
    const served = bare.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => ({ method: r.method.toLowerCase(), path: r.path.replace(/:(\w+)/g, '{$1}') }))
    assert.ok(served.length >= ROUTES.length, `${served.length} handlers for ${ROUTES.length} route modules`)
    const undocumented = served.filter((r) => !(r.method in (doc.paths[r.path] ?? {})))
    assert.deepEqual(undocumented, [], 'every route is in /openapi.json')
    // every operation sits in one section of the reference, from the document's own list of them
    const sections: string[] = (doc.tags ?? []).map((t) => t.name)
    assert.deepEqual(
      doc.tags?.map((t) => t.name),
      API_TAGS.map((t) => t.name),
    )
    assert.ok(
      doc.tags?.every((t) => t.description.length > 0),
      'every section is described',
    )
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ op: `${method} ${path}`, tags: (op as { tags?: string[] }).tags })),
    )
    const untagged = operations.filter((o) => o.tags?.length !== 1 || !sections.includes(o.tags[0] ?? ''))
    assert.deepEqual(untagged, [], 'every operation has one tag from the list')
    const unused = sections.filter((s) => !operations.some((o) => o.tags?.includes(s)))
    assert.deepEqual(unused, [], 'every section lists an operation')
    // and every error code is in it, under its status, with an example body
    const text = JSON.stringify(doc)
    const missing = errorCodes.filter((code) => !text.includes(`\`${code}\``))
    assert.deepEqual(missing, [], 'every error code is documented')
    const sandbox = doc.paths['/v1/sandboxes/{id}'] as { get: { responses: Record<string, ErrorDoc> } }
    const notFound = sandbox.get.responses['404']?.content['application/json']
    assert.match(String(sandbox.get.responses['404']?.description), /`SANDBOX_NOT_FOUND`/)
    assert.equal(notFound?.example?.error.code, 'NOT_FOUND')
    // the hand-written examples are in it, and each is valid for its schema
    const create = doc.paths['/v1/sandboxes'] as {
      post: { requestBody: { content: Record<string, { example?: unknown }> } }
    }
    assert.deepEqual(create.post.requestBody.content['application/json']?.example, examples.createSandboxExample)
    CreateSandboxRequest.parse(examples.createSandboxExample)
    Sandbox.parse(examples.sandboxExample)
    ExecRequest.parse(examples.execExample)
    ExecResult.parse(examples.execResultExample)
    RunCodeRequest.parse(examples.runCodeExample)
    Execution.parse(examples.executionExample)
    ForkRequest.parse(examples.forkExample)
  })

  it("an admin lists, inspects and kills any key's sandboxes; revoking a key can kill its sandboxes", async () => {
    const tenant = (await call('POST', '/v1/keys', { name: 'tenant' })).body as { id: string; key: string }
    const a = (await call('POST', '/v1/sandboxes', {}, tenant.key)).body as { id: string }
    const b = (await call('POST', '/v1/sandboxes', {}, tenant.key)).body as { id: string }
    // a tenant sees only its own; the admin key's own list is its own too
    assert.equal((await call('GET', '/v1/sandboxes?owner=*', undefined, tenant.key)).status, 403)
    assert.deepEqual((await call('GET', '/v1/sandboxes')).body.sandboxes, [])
    const all = (await call('GET', '/v1/sandboxes?owner=*')).body.sandboxes.map((s: { id: string }) => s.id)
    assert.deepEqual(all.sort(), [a.id, b.id].sort())
    const theirs = (await call('GET', `/v1/sandboxes?owner=${tenant.id}`)).body.sandboxes
    assert.equal(theirs.length, 2)
    assert.equal((await call('GET', `/v1/sandboxes/${a.id}`)).body.state, 'running')
    assert.equal((await call('DELETE', `/v1/sandboxes/${a.id}`)).status, 204)
    assert.equal((await call('GET', `/v1/sandboxes/${a.id}`)).body.state, 'killed')
    // the tenant's other key-scoped calls see nothing of the admin's
    const mine = (await call('POST', '/v1/sandboxes', {})).body as { id: string }
    assert.equal((await call('DELETE', `/v1/sandboxes/${mine.id}`, undefined, tenant.key)).status, 404)
    assert.equal((await call('DELETE', `/v1/keys/${tenant.id}?killSandboxes=true`)).status, 204)
    assert.equal((await call('GET', `/v1/sandboxes/${b.id}`)).body.state, 'killed')
    assert.equal((await call('GET', `/v1/sandboxes/${mine.id}`)).body.state, 'running')
  })
})
