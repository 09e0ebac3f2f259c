// The agent's own deadlines and heartbeat (issue 21): a request the guest never answers fails at
// its deadline, and a guest that stops answering is found by the watchdog and reported, while one
// that answers is left alone. Real GuestConnections over pipes; the "guest" is this test.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import type { AppError } from '@forkbox/protocol'
import { GuestClient } from '../src/guest/client.ts'
import { GuestConnection } from '../src/guest/connection.ts'
import { encodeFrame, FrameType, HEADER_BYTES } from '../src/guest/frames.ts'
import type { LiveSandbox } from '../src/sandboxes/live-sandbox.ts'
import { Watchdog } from '../src/sandboxes/watchdog.ts'

/** A connection whose guest answers pings only while `answering`; `deadlines` counts the requests given up on. */
function guest(opts: { answering: boolean }) {
  const input = new PassThrough()
  const output = new PassThrough()
  const state = { answering: opts.answering, deadlines: 0 }
  const conn = new GuestConnection(input, output, { onDeadline: () => state.deadlines++ })
  input.on('data', (b: Buffer) => {
    for (let at = 0; at + HEADER_BYTES <= b.length; ) {
      const length = b.readUInt32BE(at)
      const channel = b.readUInt32BE(at + 5)
      const msg = JSON.parse(b.subarray(at + 9, at + 9 + length).toString()) as { op: string }
      at += HEADER_BYTES + length
      if (msg.op === 'ping' && state.answering) {
        const value = { type: 'result', value: { version: '0.0.0', uptimeMs: 1 } }
        output.emit('data', encodeFrame(FrameType.json, channel, Buffer.from(JSON.stringify(value))))
      }
    }
  })
  const sbx = {
    id: 'sbx-test',
    cgroup: 'forkbox-watchdog-test-none',
    conn,
    guest: new GuestClient(conn),
    stopping: false,
    starting: false,
    frozen: false,
    checkpointing: 0,
  } as unknown as LiveSandbox
  return { conn, sbx, state }
}

const FAST = { intervalMs: 20, heartbeatMs: 50, pingDeadlineMs: 300 }

// the deadlines' and the watchdog's timers do not hold the process open (an agent's servers do):
// this one does, for the tests
let alive: NodeJS.Timeout
before(() => {
  alive = setInterval(() => {}, 1000)
})
after(() => clearInterval(alive))

describe('agent deadlines and heartbeat', () => {
  it('a request the guest never answers fails at its deadline, and the owner is told', async () => {
    const { conn, state } = guest({ answering: false })
    const t0 = performance.now()
    await assert.rejects(
      conn.call({ op: 'stat', path: '/' }, undefined as never, 150),
      (e: AppError) => e.code === 'GUEST_ERROR',
    )
    const ms = performance.now() - t0
    assert.ok(ms >= 140 && ms < 1000, `failed after ${ms} ms`)
    assert.equal(state.deadlines, 1)
    // the connection itself is not failed by one late request
    assert.equal(conn.failed, false)
  })

  it('a guest that stops answering is reported unresponsive within heartbeat + deadline', async () => {
    const { sbx } = guest({ answering: false })
    const reported: string[] = []
    const dog = new Watchdog(
      () => [sbx],
      (_s, m) => reported.push(m),
      () => {},
      () => {},
      FAST,
    )
    const t0 = performance.now()
    dog.start()
    try {
      for (let i = 0; i < 100 && reported.length === 0; i++) await new Promise((r) => setTimeout(r, 20))
    } finally {
      dog.stop()
    }
    assert.equal(reported.length, 1, 'not reported')
    assert.match(reported[0] ?? '', /did not answer for 0 s/)
    assert.ok(performance.now() - t0 < 1500)
  })

  it('a guest that answers, a frozen one and a checkpointing one are left alone', async () => {
    const live = guest({ answering: true })
    const frozen = guest({ answering: false })
    ;(frozen.sbx as { frozen: boolean }).frozen = true
    const saving = guest({ answering: false })
    ;(saving.sbx as { checkpointing: number }).checkpointing = 1
    const reported: string[] = []
    const dog = new Watchdog(
      () => [live.sbx, frozen.sbx, saving.sbx],
      (s, m) => reported.push(`${s.id}: ${m}`),
      () => {},
      () => {},
      FAST,
    )
    dog.start()
    await new Promise((r) => setTimeout(r, 800))
    dog.stop()
    assert.deepEqual(reported, [])
  })
})
