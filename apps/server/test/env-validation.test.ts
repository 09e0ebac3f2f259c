// Environment variables a process could not be started with are refused at the edge, on every
// route that takes them (REST and the E2B layer), as VALIDATION_FAILED: never sent to a sandbox.
import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, it } from 'node:test'
import type { ControlPlane } from '../src/index.ts'
import { envelope } from './connect.ts'
import { fakeControlPlane, type TestControlPlane } from './control-plane.ts'

let cp: ControlPlane

let plane: TestControlPlane

beforeEach(async () => {
  plane = await fakeControlPlane('env')
  cp = plane.cp
})

afterEach(() => plane.close())

const BAD_ENVS: Record<string, string>[] = [{ 'A=B': 'x' }, { '': 'x' }, { 'A\0B': 'x' }, { OK: 'a\0b' }]

async function call(key: string, path: string, body: unknown) {
  const res = await cp.app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: (await res.json()) as { error?: { code: string } } }
}

describe('environment variables', () => {
  it('are refused on exec, code runs and code contexts', async () => {
    const key = cp.bootstrapKey as string
    const s = await call(key, '/v1/sandboxes', {})
    assert.equal(s.status, 201)
    const id = (s.body as unknown as { id: string }).id
    for (const env of BAD_ENVS) {
      const cases: [string, unknown][] = [
        [`/v1/sandboxes/${id}/exec`, { cmd: ['true'], env }],
        [`/v1/sandboxes/${id}/code`, { code: '1', envs: env }],
        [`/v1/sandboxes/${id}/code/contexts`, { envs: env }],
        ['/v1/sandboxes', { envs: env }],
      ]
      for (const [path, body] of cases) {
        const r = await call(key, path, body)
        assert.deepEqual([r.status, r.body.error?.code], [400, 'VALIDATION_FAILED'], `${path} ${JSON.stringify(env)}`)
      }
    }
  })

  it('are refused on E2B process starts, commands and terminals alike', async () => {
    const key = (await cp.keys.create({ name: 'e2b', format: 'e2b' })).key
    const created = await cp.app.request('/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': key, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', timeout: 60 }),
    })
    const sbx = (await created.json()) as { sandboxID: string; envdAccessToken: string }
    for (const pty of [undefined, { size: { cols: 80, rows: 24 } }]) {
      const res = await cp.app.request('/process.Process/Start', {
        method: 'POST',
        headers: {
          'E2b-Sandbox-Id': sbx.sandboxID,
          'E2b-Sandbox-Port': '49983',
          'X-Access-Token': sbx.envdAccessToken,
          'content-type': 'application/connect+json',
        },
        body: envelope({ process: { cmd: '/bin/bash', args: ['-l'], envs: { 'A=B': 'x' } }, pty }),
      })
      const body = Buffer.from(await res.arrayBuffer())
      const end = JSON.parse(body.subarray(5, 5 + body.readUInt32BE(1)).toString())
      assert.equal(body.readUInt8(0), 2, 'an end-of-stream envelope')
      assert.equal(end.error.code, 'invalid_argument', JSON.stringify(end))
      assert.equal(end.error.errorCode, 'VALIDATION_FAILED')
    }
  })
})
