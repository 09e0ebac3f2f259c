// The call path on a running sandbox (services/sandbox-calls.ts): exec, code cells, directory watch.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { agent, call, cp, key, useControlPlane } from './app-harness.ts'
import { FakeGuest } from './fake-agent.ts'

describe('sandbox calls', () => {
  useControlPlane()

  it('a call refused as its sandbox moves (SANDBOX_MOVING: never started) is sent again until it goes through', async () => {
    const created = await call('POST', '/v1/sandboxes', { template: 'base' })
    const real = new FakeGuest(agent, created.body.id)
    let refused = 0
    agent.calls.exec = async (...args: Parameters<FakeGuest['exec']>) => {
      if (refused < 3) {
        refused++
        throw new AppError('SANDBOX_MOVING', 'moving')
      }
      return real.exec(...args)
    }
    const r = await call('POST', `/v1/sandboxes/${created.body.id}/exec`, { cmd: 'echo hi' })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(refused, 3)
  })

  it('an exec past its timeout is EXEC_TIMEOUT with the partial output', async () => {
    const s = await call('POST', '/v1/sandboxes', {})
    agent.nextExec = { timedOut: true, exitCode: 137, signal: 'SIGKILL', stdout: Buffer.from('partial') }
    const r = await call('POST', `/v1/sandboxes/${s.body.id}/exec`, { cmd: 'sleep 9', timeoutSeconds: 1 })
    assert.equal(r.status, 408)
    assert.equal(r.body.error.code, 'EXEC_TIMEOUT')
    assert.equal(r.body.error.details.stdout, 'partial')
  })

  it('runs a cell as one Execution, or streams it as SSE with the same content', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const r = await call('POST', `/v1/sandboxes/${sbx.id}/code`, { code: 'x' })
    assert.equal(r.status, 200)
    assert.deepEqual(r.body.logs, { stdout: ['x ', 'é\n'], stderr: ['warn\n'] })
    assert.deepEqual(r.body.results, [{ isMainResult: true, text: 'x' }])
    assert.equal(r.body.executionCount, 1)
    const res = await cp.app.request(`/v1/sandboxes/${sbx.id}/code`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'y' }),
    })
    assert.equal(res.headers.get('content-type'), 'text/event-stream')
    const events = (await res.text())
      .trim()
      .split('\n\n')
      .map((block) => {
        const event = /^event: (.*)$/m.exec(block)?.[1]
        const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null')
        return { event, data }
      })
    assert.deepEqual(
      events.map((e) => e.event),
      ['stdout', 'stdout', 'stderr', 'result', 'end'],
    )
    assert.equal(events[1]?.data.text, 'é\n')
    assert.equal(events[4]?.data.executionCount, 1)
    // errors before the cell starts are plain HTTP errors, streaming or not
    const missing = await cp.app.request('/v1/sandboxes/sbx_nope/code', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'y' }),
    })
    assert.equal(missing.status, 404)
    assert.equal(((await missing.json()) as { error: { code: string } }).error.code, 'SANDBOX_NOT_FOUND')
    const bad = await call('POST', `/v1/sandboxes/${sbx.id}/code`, { code: 'x', language: 'cobol' })
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED')
  })

  it('streams a directory watch as SSE; a refused watch is a plain error', async () => {
    const { body: sbx } = await call('POST', '/v1/sandboxes', { template: 'base' })
    const res = await cp.app.request(`/v1/sandboxes/${sbx.id}/files/watch?path=work&recursive=true`, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(res.headers.get('content-type'), 'text/event-stream')
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    while ((text.match(/^event: change$/gm) ?? []).length < 5)
      text += new TextDecoder().decode((await reader.read()).value)
    await reader.cancel()
    const events = text
      .trim()
      .split('\n\n')
      .map((block) => ({
        event: /^event: (.*)$/m.exec(block)?.[1],
        data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null'),
      }))
    assert.deepEqual(events[0], { event: 'start', data: { path: '/home/user/work' } })
    assert.deepEqual(events[1], {
      event: 'change',
      data: { type: 'create', name: 'sub/f.txt', path: '/home/user/work/sub/f.txt' },
    })
    assert.deepEqual(
      events.slice(1).map((e) => e.data.type),
      ['create', 'write', 'remove', 'rename', 'chmod'],
    )
    const missing = await call('GET', `/v1/sandboxes/${sbx.id}/files/watch?path=/missing`)
    assert.equal(missing.status, 404)
    assert.equal(missing.body.error.code, 'FILE_NOT_FOUND')
    const bad = await call('GET', `/v1/sandboxes/${sbx.id}/files/watch?path=../etc`)
    assert.equal(bad.body.error.code, 'INVALID_PATH')
  })
})
