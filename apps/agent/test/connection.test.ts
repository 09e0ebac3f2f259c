import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'
import { AppError, GuestExit, GuestResult } from '@forkbox/protocol'
import { z } from 'zod'
import {
  type ChannelHandler,
  GuestConnection,
  GuestProtocolError,
  WINDOW_SLACK_BYTES,
} from '../src/guest/connection.ts'
import { encodeFrame, FrameType, HEADER_BYTES, MAX_FRAME_BYTES } from '../src/guest/frames.ts'

/** A connection over fake pipes; `guest` writes what a (hostile) guest would, straight into the 'data' event. */
function connect(opts: { resync?: boolean } = {}) {
  const input = new PassThrough()
  const output = new PassThrough()
  const broken: string[] = []
  const logged: string[] = []
  const conn = new GuestConnection(input, output, {
    ...opts,
    onProtocolError: (_err, detail) => broken.push(detail),
    log: (m) => logged.push(m),
  })
  const sent: { type: number; channel: number; payload: Buffer }[] = []
  input.on('data', (b: Buffer) => {
    for (let at = 0; at + HEADER_BYTES <= b.length; ) {
      const length = b.readUInt32BE(at)
      sent.push({
        type: b.readUInt8(at + 4),
        channel: b.readUInt32BE(at + 5),
        payload: b.subarray(at + 9, at + 9 + length),
      })
      at += HEADER_BYTES + length
    }
  })
  const guest = (bytes: Buffer) => assert.doesNotThrow(() => output.emit('data', bytes))
  const json = (channel: number, msg: unknown) =>
    guest(encodeFrame(FrameType.json, channel, Buffer.from(JSON.stringify(msg))))
  return { conn, guest, json, broken, logged, sent, input }
}

/** Opens a channel and records how it ends. */
function track<T>(conn: GuestConnection, handler: Omit<ChannelHandler<T>, 'settle'>) {
  const out: { err?: Error | null; msg?: T; settled: number } = { settled: 0 }
  const channel = conn.open<T>(
    { op: 'ping' },
    {
      ...handler,
      settle: (err, msg) => {
        out.settled++
        out.err = err
        out.msg = msg
      },
    },
  )
  return { channel, out }
}

function assertProtocolError(err: Error | null | undefined) {
  assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`)
  assert.equal(err.code, 'SANDBOX_ERRORED')
  assert.deepEqual(err.details, { reason: 'guest_protocol_error' })
}

const exit = { type: 'exit', exitCode: 0, signal: null, timedOut: false, truncated: false, durationMs: 1.5 }

describe('guest connection', () => {
  it('settles requests with their checked terminal messages, across chunk boundaries', async () => {
    const { conn, guest, json, broken } = connect()
    const value = conn.call({ op: 'ping' }, z.object({ pong: z.literal(true) }))
    const { channel, out } = track(conn, { terminal: GuestExit, events: ['started'], onMessage: () => {} })
    const wire = Buffer.concat([
      encodeFrame(FrameType.json, 1, Buffer.from(JSON.stringify({ type: 'result', value: { pong: true } }))),
      encodeFrame(FrameType.json, channel, Buffer.from(JSON.stringify({ type: 'started', pid: 7 }))),
    ])
    for (const byte of wire) guest(Buffer.from([byte]))
    json(channel, { ...exit, exitCode: 3 })
    assert.deepEqual(await value, { pong: true })
    assert.equal(out.err, null)
    assert.equal(out.msg?.exitCode, 3)
    assert.deepEqual(broken, [])
    assert.equal(conn.failed, false)
  })

  it('a malformed JSON frame fails the connection, not the process', async () => {
    const { conn, guest, broken } = connect()
    const pending = conn.call({ op: 'ping' })
    guest(encodeFrame(FrameType.json, 0, Buffer.from('{')))
    assert.equal(conn.failed, true)
    assert.match(broken[0] ?? '', /malformed JSON on channel 0/)
    await assert.rejects(pending, (err: Error) => {
      assertProtocolError(err)
      return true
    })
    // later requests fail at once; later bytes are ignored
    await assert.rejects(conn.call({ op: 'ping' }), /broke the protocol/)
    guest(encodeFrame(FrameType.json, 1, Buffer.from('{')))
    assert.equal(broken.length, 1)
  })

  it('malformed JSON on a request channel, or on one nobody listens to, fails it too', () => {
    for (const channel of [1, 99]) {
      const { conn, guest, broken } = connect()
      const { out } = track(conn, {})
      guest(encodeFrame(FrameType.json, channel, Buffer.from('{"type":"result",')))
      assert.equal(conn.failed, true)
      assert.equal(broken.length, 1)
      assertProtocolError(out.err)
    }
  })

  it('a forged exit with a wrong-typed exitCode fails the connection instead of ending the request', () => {
    const { conn, json, broken } = connect()
    const { channel, out } = track(conn, { terminal: GuestExit, dataTypes: [FrameType.stdout] })
    json(channel, { ...exit, exitCode: '77' })
    assert.equal(out.settled, 1)
    assertProtocolError(out.err)
    assert.equal(out.msg, undefined)
    assert.match(broken[0] ?? '', /exitCode/)
  })

  it('a terminal message of the wrong kind, or an unknown message type, fails the connection', () => {
    const cases: [ChannelHandler<unknown>['terminal'], unknown][] = [
      [GuestExit, { type: 'result', value: { exitCode: 0 } }],
      [GuestResult, exit],
      [undefined, { type: 'result' }],
      [undefined, { type: 'surprise' }],
      [undefined, ['result']],
    ]
    for (const [terminal, msg] of cases) {
      const { conn, json, broken } = connect()
      const { channel, out } = track(conn, { terminal })
      json(channel, msg)
      assert.equal(conn.failed, true, JSON.stringify(msg))
      assert.equal(broken.length, 1)
      assertProtocolError(out.err)
    }
  })

  it('an oversize frame header fails the connection', () => {
    const { conn, guest, broken } = connect()
    const { out } = track(conn, {})
    const header = Buffer.alloc(HEADER_BYTES)
    header.writeUInt32BE(MAX_FRAME_BYTES + 1, 0)
    header.writeUInt8(FrameType.json, 4)
    guest(header)
    assert.equal(conn.failed, true)
    assert.match(broken[0] ?? '', /oversize/)
    assertProtocolError(out.err)
  })

  it('unknown frame types, stdin from the guest and data on channel 0 fail the connection', () => {
    for (const frame of [
      encodeFrame(9 as FrameType, 1, Buffer.from('x')),
      encodeFrame(FrameType.stdin, 1, Buffer.from('x')),
      encodeFrame(FrameType.stdout, 0, Buffer.from('x')),
    ]) {
      const { conn, guest, broken } = connect()
      track(conn, { onData: () => {} })
      guest(frame)
      assert.equal(conn.failed, true)
      assert.equal(broken.length, 1)
    }
  })

  it('data or messages a request does not take fail the connection', () => {
    const data = connect()
    const call = data.conn.call({ op: 'stat', path: '/' })
    call.catch(() => {})
    data.guest(encodeFrame(FrameType.stdout, 1, Buffer.from('forged')))
    assert.equal(data.conn.failed, true)

    const event = connect()
    track(event.conn, { events: ['started'], onMessage: () => {} })
    event.json(1, { type: 'display', main: true, data: {} })
    assert.equal(event.conn.failed, true)

    const kind = connect()
    track(kind.conn, { dataTypes: [FrameType.stdout, FrameType.stderr], onData: () => {} })
    kind.guest(encodeFrame(FrameType.file, 1, Buffer.from('x')))
    assert.equal(kind.conn.failed, true)
  })

  it('a flood past a request cap fails the connection before it is buffered', () => {
    const { conn, guest, broken } = connect()
    const got: number[] = []
    const { channel, out } = track(conn, {
      dataTypes: [FrameType.stdout, FrameType.stderr],
      maxBytesPerStream: 1000,
      onData: (_type, payload) => got.push(payload.length),
    })
    // each stream has its own cap
    guest(encodeFrame(FrameType.stdout, channel, Buffer.alloc(1000)))
    guest(encodeFrame(FrameType.stderr, channel, Buffer.alloc(1000)))
    assert.equal(conn.failed, false)
    for (let i = 0; i < 100; i++) guest(encodeFrame(FrameType.stdout, channel, Buffer.alloc(64 * 1024)))
    assert.equal(conn.failed, true)
    assert.deepEqual(got, [1000, 1000])
    assert.match(broken[0] ?? '', /more than 1000 bytes of stdout/)
    assertProtocolError(out.err)
  })

  it('a flow-controlled channel may run one window ahead of its acks, no further', () => {
    const { conn, guest, sent } = connect()
    const window = 64 * 1024
    const { channel } = track(conn, { dataTypes: [FrameType.stdout], window, onData: () => {} })
    const chunk = Buffer.alloc(window)
    // acked as it goes: any amount
    for (let i = 0; i < 40; i++) {
      guest(encodeFrame(FrameType.stdout, channel, chunk))
      conn.ack(channel, chunk.length)
    }
    assert.equal(conn.failed, false)
    assert.ok(sent.some((f) => f.channel === channel && JSON.parse(f.payload.toString()).op === 'ack'))
    // never acked: the window plus its slack, then the guest is ignoring flow control
    const room = window + WINDOW_SLACK_BYTES
    for (let n = 0; n + chunk.length <= room; n += chunk.length) guest(encodeFrame(FrameType.stdout, channel, chunk))
    assert.equal(conn.failed, false)
    guest(encodeFrame(FrameType.stdout, channel, chunk))
    assert.equal(conn.failed, true)
  })

  it('a resync the agent did not ask for fails the connection; one it asked for is its ready', async () => {
    const unasked = connect()
    unasked.json(0, { type: 'resynced', nextChannel: 5 })
    assert.equal(unasked.conn.failed, true)

    const asked = connect({ resync: true })
    // what the old agent left half-sent is skipped up to the mark
    asked.guest(Buffer.from([0, 0, 1, 0, 2, 0, 0, 0, 3, 0xff, 0xfe]))
    asked.json(0, { type: 'resynced', nextChannel: 40, version: '0.1.0' })
    assert.equal((await asked.conn.ready).type, 'resynced')
    const { channel } = track(asked.conn, {})
    assert.equal(channel, 40)
    asked.json(0, { type: 'resynced', nextChannel: 50 })
    assert.equal(asked.conn.failed, true)
  })

  it('a handler that throws fails its own request only; a GuestProtocolError fails the connection', async () => {
    const { conn, guest, json, logged, broken } = connect()
    const { channel: a, out: outA } = track(conn, {
      onData: () => {
        throw new TypeError('Invalid state: the stream is closed')
      },
    })
    const { channel: b, out: outB } = track(conn, {
      onData: () => Promise.reject(new Error('consumer went away')),
    })
    const { channel: c, out: outC } = track<z.infer<typeof GuestResult>>(conn, {})
    guest(encodeFrame(FrameType.file, a, Buffer.from('x')))
    guest(encodeFrame(FrameType.file, b, Buffer.from('x')))
    await new Promise((r) => setImmediate(r))
    assert.equal(conn.failed, false)
    assert.equal((outA.err as AppError).code, 'INTERNAL')
    assert.equal((outB.err as AppError).code, 'INTERNAL')
    assert.equal(logged.length, 2)
    // the dropped channels' later frames are ignored; the others carry on
    guest(encodeFrame(FrameType.file, a, Buffer.from('x')))
    json(c, { type: 'result', value: 1 })
    assert.equal(outC.msg?.value, 1)
    assert.deepEqual(broken, [])

    const { channel: d, out: outD } = track(conn, {
      onData: () => {
        throw new GuestProtocolError('that is not a file')
      },
    })
    guest(encodeFrame(FrameType.file, d, Buffer.from('x')))
    assert.equal(conn.failed, true)
    assertProtocolError(outD.err)
  })

  it('a settle that throws or rejects is logged, never thrown into the stream', async () => {
    const { conn, json, logged } = connect()
    conn.open({ op: 'ping' }, { settle: () => Promise.reject(new Error('late')) })
    conn.open(
      { op: 'ping' },
      {
        settle: () => {
          throw new Error('sync')
        },
      },
    )
    json(1, { type: 'result', value: null })
    json(2, { type: 'result', value: null })
    await new Promise((r) => setImmediate(r))
    assert.equal(conn.failed, false)
    assert.equal(logged.length, 2)
  })

  it('a guest may not answer with platform error codes', async () => {
    const { conn, json } = connect()
    const a = conn.call({ op: 'stat', path: '/' })
    const b = conn.call({ op: 'stat', path: '/' })
    json(1, { type: 'error', code: 'FILE_NOT_FOUND', message: 'no such file' })
    json(2, { type: 'error', code: 'UNAUTHENTICATED', message: 'x'.repeat(100_000) })
    await assert.rejects(a, (err: AppError) => err.code === 'FILE_NOT_FOUND')
    await assert.rejects(b, (err: AppError) => err.code === 'GUEST_ERROR' && err.message.length < 10_000)
    assert.equal(conn.failed, false)
  })

  it('a result value that does not match what the request reads fails the connection', async () => {
    const { conn, json } = connect()
    const started = conn.call({ op: 'exec' }, z.object({ pid: z.number().int().positive() }))
    json(1, { type: 'result', value: { pid: 'one' } })
    await assert.rejects(started, /broke the protocol/)
    assert.equal(conn.failed, true)
  })
})

describe('a restored guest', () => {
  it("starts the new agent's requests past the channels its snapshot may still answer on", async () => {
    const { conn, json, sent } = connect()
    const configured = conn.configureRestored({ env: {} })
    const request = sent.at(-1)
    assert.equal(request?.channel, 1)
    assert.equal(JSON.parse(String(request?.payload)).restored, true)
    json(1, { type: 'result', value: { nextChannel: 40 } })
    await configured
    const { channel } = track(conn, {})
    assert.equal(channel, 40)
    // a frame for a channel of the old agent goes nowhere and breaks nothing
    json(7, { type: 'exit', exitCode: 0, signal: null, timedOut: false, durationMs: 1 })
    assert.equal(conn.failed, false)
  })
})
