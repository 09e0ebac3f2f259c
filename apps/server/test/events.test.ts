// A key's event feed, listed and streamed live (services/sandbox-events.ts).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { call, cp, key, useControlPlane } from './app-harness.ts'

describe('event feed', () => {
  useControlPlane()

  it("lists a key's events across sandboxes and streams new ones live, resumable by id", async () => {
    const a = (await call('POST', '/v1/sandboxes', {})).body
    const other = await call('POST', '/v1/keys', { name: 'other' })
    await call('POST', '/v1/sandboxes', {}, other.body.key)
    await call('POST', `/v1/sandboxes/${a.id}/exec`, { cmd: 'true' })
    const listed = (await call('GET', '/v1/events')).body.events
    assert.deepEqual(
      listed.map((e: { type: string }) => e.type),
      ['created', 'started', 'exec-started', 'exec-ended'],
    )
    assert.ok(
      listed.every((e: { sandboxId: string }) => e.sandboxId === a.id),
      "another key's events leaked",
    )
    const filtered = (await call('GET', `/v1/events?type=exec-ended&sandboxId=${a.id}`)).body.events
    assert.deepEqual(
      filtered.map((e: { detail: string }) => e.detail),
      ['exit 0'],
    )
    // live: past events after `since`, then new ones as they happen
    const res = await cp.app.request(`/v1/events?since=${listed[1].id}`, {
      headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    })
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const seen: string[] = []
    let text = ''
    const read = async (until: string) => {
      while (!seen.includes(until)) {
        const { value } = await reader.read()
        text += new TextDecoder().decode(value)
        for (const m of text.matchAll(/^event: (.+)$/gm)) if (!seen.includes(m[1] as string)) seen.push(m[1] as string)
      }
    }
    await read('exec-ended')
    await call('DELETE', `/v1/sandboxes/${a.id}`)
    await read('killed')
    assert.deepEqual(seen, ['exec-started', 'exec-ended', 'killed'])
    assert.match(text, /^id: \d+$/m)
    // the client going away ends the stream (and its subscription) on the server
    await reader.cancel()
  })
})
