import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { FileReadStream, UNKNOWN_SIZE_MAX_BYTES } from '../src/guest/file-read.ts'

const WINDOW = 1024

/** The guest channel's edge: deliveries in order, each acked once it settles (as AckedDelivery). */
function fakeChannel() {
  let tail = Promise.resolve()
  const ch = {
    acks: [] as number[],
    aborts: 0,
    push(deliver: () => Promise<void>, bytes: number) {
      tail = tail
        .then(deliver)
        .catch(() => {})
        .then(() => {
          if (bytes > 0) ch.acks.push(bytes)
        })
    },
    abort() {
      ch.aborts++
    },
    settled: () => tail,
  }
  return ch
}

const tick = () => new Promise((r) => setImmediate(r))
const bytes = (n: number, fill = 1) => Buffer.alloc(n, fill)

async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    yield value
  }
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const out: Uint8Array[] = []
  for await (const chunk of chunksOf(stream)) out.push(chunk)
  return Buffer.concat(out)
}

describe('file read stream', () => {
  it('hands a chunk on only when the consumer pulls, and acks it then', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(300)
    for (const n of [100, 100, 100]) file.data(bytes(n))
    await tick()
    // nobody has read yet: nothing was handed on, nothing acked
    assert.deepEqual(ch.acks, [])
    const reader = file.stream.getReader()
    assert.equal((await reader.read()).value?.length, 100)
    await tick()
    assert.deepEqual(ch.acks, [100])
    file.end(null)
    assert.equal((await reader.read()).value?.length, 100)
    assert.equal((await reader.read()).value?.length, 100)
    assert.equal((await reader.read()).done, true)
    await ch.settled()
    assert.deepEqual(ch.acks, [100, 100, 100])
    assert.equal(ch.aborts, 0)
  })

  it('delivers a whole file in order', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(6)
    file.data(Buffer.from('abc'))
    file.data(Buffer.from('def'))
    file.end(null)
    assert.equal((await readAll(file.stream)).toString(), 'abcdef')
  })

  it('a consumer that cancels aborts the guest once; what arrives later is dropped without throwing', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(1000)
    file.data(bytes(100))
    const reader = file.stream.getReader()
    await reader.read()
    await reader.cancel()
    assert.equal(ch.aborts, 1)
    file.data(bytes(100))
    file.data(bytes(5000))
    file.end(null)
    file.end(new AppError('CANCELLED', 'the read was cancelled'))
    await ch.settled()
    assert.equal(ch.aborts, 1)
  })

  it('a consumer that cancels while chunks wait releases them', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(1000)
    for (let i = 0; i < 5; i++) file.data(bytes(100))
    await file.stream.cancel()
    await ch.settled()
    assert.equal(ch.aborts, 1)
  })

  it('more bytes than the declared size error the stream and abort the guest', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(10)
    file.data(bytes(8))
    file.data(bytes(8))
    assert.equal(ch.aborts, 1)
    await assert.rejects(readAll(file.stream), (e: unknown) => e instanceof AppError && e.code === 'GUEST_ERROR')
  })

  it('fewer bytes than the declared size error the stream', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(10)
    file.data(bytes(4))
    file.end(null)
    await assert.rejects(readAll(file.stream), /ended after 4 of 10 bytes/)
  })

  it('a file of unknown size is cut off past the cap', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, UNKNOWN_SIZE_MAX_BYTES * 2)
    file.open(null)
    const reading = readAll(file.stream)
    for (let sent = 0; sent <= UNKNOWN_SIZE_MAX_BYTES; sent += 1 << 20) file.data(bytes(1 << 20))
    await assert.rejects(reading, (e: unknown) => e instanceof AppError && e.code === 'PAYLOAD_TOO_LARGE')
    assert.equal(ch.aborts, 1)
  })

  it('a guest that sends past its window is cut off instead of buffered', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(null)
    for (let i = 0; i < 20; i++) file.data(bytes(100))
    assert.equal(ch.aborts, 1)
    await assert.rejects(readAll(file.stream), /flow-control window/)
  })

  it("the guest's error ends the stream with it, without an abort", async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(null)
    file.data(bytes(10))
    file.end(new AppError('PERMISSION_DENIED', 'no'))
    await assert.rejects(readAll(file.stream), (e: unknown) => e instanceof AppError && e.code === 'PERMISSION_DENIED')
    assert.equal(ch.aborts, 0)
  })

  it('a slow consumer holds at most a window in flight', async () => {
    const ch = fakeChannel()
    const file = new FileReadStream(ch, WINDOW)
    file.open(null)
    // a guest that honours the window: it sends only while unacked bytes stay within it
    let sent = 0
    const total = 20 * WINDOW
    const guest = async () => {
      while (sent < total) {
        const acked = ch.acks.reduce((a, b) => a + b, 0)
        if (sent - acked + 256 > WINDOW) {
          await tick()
          continue
        }
        file.data(bytes(256))
        sent += 256
      }
      file.end(null)
    }
    const running = guest()
    let got = 0
    for await (const chunk of chunksOf(file.stream)) {
      got += chunk.length
      await tick()
    }
    await running
    assert.equal(got, total)
    assert.equal(ch.aborts, 0)
  })
})
