import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '../src/errors.ts'
import { decodeFrame, encodeFrame, RpcPeer, type RpcTarget } from '../src/rpc.ts'

/** Two peers joined by an in-memory channel that delivers each frame on a later tick, as a socket does. */
function pair(target: RpcTarget, onEvent?: (name: string, args: unknown[]) => void) {
  const frames = { toServer: 0, toClient: 0 }
  let server: RpcPeer
  const client = new RpcPeer(
    {
      send: (f) => {
        frames.toServer++
        const copy = f.slice()
        setImmediate(() => server.receive(copy))
      },
    },
    {},
    onEvent,
  )
  server = new RpcPeer(
    {
      send: (f) => {
        frames.toClient++
        const copy = f.slice()
        setImmediate(() => client.receive(copy))
      },
    },
    target,
  )
  return { client, server, frames }
}

/** Scopes and references each peer still holds (private: read for the leak checks only). */
function held(p: RpcPeer): number {
  const r = p as unknown as Record<string, Map<unknown, unknown>>
  return ['scopes', 'exported', 'waiting', 'promises', 'signals'].reduce((n, k) => n + (r[k]?.size ?? 0), 0)
}

const tick = () => new Promise((r) => setTimeout(r, 5))

describe('rpc frames', () => {
  it('carries a header and its blobs, and refuses frames that overrun', () => {
    const f = encodeFrame({ x: 1 }, [new Uint8Array([1, 2]), new Uint8Array([3])])
    const { header, blobs } = decodeFrame(f)
    assert.deepEqual(header, { x: 1 })
    assert.deepEqual(
      blobs.map((b) => [...b]),
      [[1, 2], [3]],
    )
    assert.throws(() => decodeFrame(f.subarray(0, f.length - 1)), /overruns/)
    assert.throws(() => decodeFrame(new Uint8Array([0, 0, 0])), /too short/)
    assert.throws(() => decodeFrame(new Uint8Array([0, 0, 1, 0, 1])), /overruns/)
  })
})

describe('rpc peer', () => {
  it('returns values with bytes, undefined and nested objects intact', async () => {
    const { client, server } = pair({
      echo: (...args: unknown[]) => ({ args, bytes: new Uint8Array([0, 255, 7]), none: undefined, n: null }),
    })
    const r = (await client.call('echo', [1, 'a', undefined, { deep: [new Uint8Array([9])] }])) as Record<
      string,
      unknown
    >
    assert.deepEqual(r.args, [1, 'a', undefined, { deep: [new Uint8Array([9])] }])
    assert.deepEqual(r.bytes, new Uint8Array([0, 255, 7]))
    assert.equal(r.n, null)
    await tick()
    assert.equal(held(client), 0)
    assert.equal(held(server), 0)
  })

  it('rebuilds an AppError with its code and details; other errors keep message and name', async () => {
    const { client } = pair({
      coded: () => {
        throw new AppError('SANDBOX_NOT_FOUND', 'no sandbox x', { id: 'x' })
      },
      plain: async () => {
        const e = new Error('boom')
        e.name = 'TypeError'
        throw e
      },
    })
    await assert.rejects(client.call('coded', []), (e: unknown) => {
      assert.ok(e instanceof AppError)
      assert.equal(e.code, 'SANDBOX_NOT_FOUND')
      assert.deepEqual(e.details, { id: 'x' })
      return true
    })
    await assert.rejects(client.call('plain', []), { name: 'TypeError', message: 'boom' })
    await assert.rejects(client.call('missing', []), { code: 'NOT_IMPLEMENTED' })
    await assert.rejects(client.call('hasOwnProperty', []), { code: 'NOT_IMPLEMENTED' })
  })

  it('calls back handlers in order and waits for each (flow control)', async () => {
    const seen: string[] = []
    const { client, server } = pair({
      stream: async (n: number, h: { onChunk(b: Uint8Array): Promise<void> }) => {
        for (let i = 0; i < n; i++) {
          await h.onChunk(new Uint8Array([i]))
          seen.push(`sent ${i}`)
        }
        return 'done'
      },
    })
    const r = await client.call('stream', [
      3,
      {
        onChunk: async (b: Uint8Array) => {
          seen.push(`got ${b[0]}`)
          await tick()
          seen.push(`ack ${b[0]}`)
        },
      },
    ])
    assert.equal(r, 'done')
    assert.deepEqual(seen, ['got 0', 'ack 0', 'sent 0', 'got 1', 'ack 1', 'sent 1', 'got 2', 'ack 2', 'sent 2'])
    await tick()
    assert.equal(held(client), 0)
    assert.equal(held(server), 0)
  })

  it('forwards an abort to the callee', async () => {
    const { client, server } = pair({
      wait: (signal: AbortSignal) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    })
    const ac = new AbortController()
    const p = client.call('wait', [ac.signal])
    await tick()
    ac.abort()
    await assert.rejects(p, { code: 'CANCELLED' })
    await tick()
    assert.equal(held(server), 0)
    assert.equal(held(client), 0)
  })

  it('pulls an argument iterator on demand and a returned stream as it is read', async () => {
    let produced = 0
    async function* body() {
      for (let i = 0; i < 4; i++) {
        produced++
        yield new Uint8Array([i, i])
      }
    }
    const { client, server } = pair({
      sum: async (it: AsyncIterable<Uint8Array>) => {
        let n = 0
        for await (const b of it) n += b.length
        return n
      },
      read: () => ({
        size: 3,
        stream: new ReadableStream({
          start(c) {
            c.enqueue(new Uint8Array([1]))
            c.enqueue(new Uint8Array([2, 3]))
            c.close()
          },
        }),
      }),
    })
    assert.equal(await client.call('sum', [body()]), 8)
    assert.equal(produced, 4)
    const r = (await client.call('read', [])) as { size: number; stream: ReadableStream<Uint8Array> }
    const got: number[] = []
    const reader = r.stream.getReader()
    for (let c = await reader.read(); !c.done; c = await reader.read()) got.push(...c.value)
    assert.deepEqual(got, [1, 2, 3])
    await tick()
    assert.equal(held(client), 0)
    assert.equal(held(server), 0)
  })

  it('a callee that stops reading early ends the caller iterator', async () => {
    let finished = false
    async function* body() {
      try {
        for (let i = 0; ; i++) yield new Uint8Array([i])
      } finally {
        finished = true
      }
    }
    const { client, server } = pair({
      first: async (it: AsyncIterable<Uint8Array>) => {
        for await (const b of it) return b[0]
      },
    })
    assert.equal(await client.call('first', [body()]), 0)
    await tick()
    assert.ok(finished)
    assert.equal(held(client), 0)
    assert.equal(held(server), 0)
  })

  it('keeps a returned session reachable until its promises settle (a terminal)', async () => {
    const typed: number[] = []
    let exit!: (v: { exitCode: number }) => void
    class Session {
      pid = Promise.resolve(42)
      exited = new Promise<{ exitCode: number }>((r) => {
        exit = r
      })
      write(b: Uint8Array) {
        typed.push(...b)
      }
    }
    const { client, server } = pair({ open: () => new Session() })
    const s = (await client.call('open', [])) as {
      pid: Promise<number>
      exited: Promise<{ exitCode: number }>
      write(b: Uint8Array): Promise<void>
    }
    assert.equal(await s.pid, 42)
    await s.write(new Uint8Array([104, 105]))
    assert.deepEqual(typed, [104, 105])
    exit({ exitCode: 0 })
    assert.deepEqual(await s.exited, { exitCode: 0 })
    await tick()
    assert.equal(held(client), 0)
    assert.equal(held(server), 0)
    await assert.rejects(s.write(new Uint8Array([1])), /gone/)
  })

  it('carries errors inside values (a fork outcome)', async () => {
    const { client } = pair({
      fork: () => [
        { id: 'a', error: null },
        { id: 'b', error: new AppError('NO_SPACE', 'full') },
      ],
    })
    const r = (await client.call('fork', [])) as { id: string; error: Error | null }[]
    assert.equal(r[0]?.error, null)
    const failed = r[1]?.error
    assert.ok(failed instanceof AppError)
    assert.equal(failed.code, 'NO_SPACE')
  })

  it('raises events on the other end', async () => {
    const events: unknown[] = []
    const { server } = pair({}, (name, args) => events.push([name, ...args]))
    server.emit('exit', ['sbx-1', 'out_of_memory', null])
    await tick()
    assert.deepEqual(events, [['exit', 'sbx-1', 'out_of_memory', null]])
  })

  it('fails every pending call, fires every signal when the channel closes', async () => {
    let aborted = false
    const { client, server } = pair({
      hang: (signal: AbortSignal) =>
        new Promise(() =>
          signal.addEventListener('abort', () => {
            aborted = true
          }),
        ),
    })
    const p = client.call('hang', [new AbortController().signal])
    await tick()
    client.close(new AppError('HOST_UNREACHABLE', 'gone'))
    server.close(new AppError('HOST_UNREACHABLE', 'gone'))
    await assert.rejects(p, { code: 'HOST_UNREACHABLE' })
    assert.ok(aborted)
    await assert.rejects(client.call('hang', []), { code: 'HOST_UNREACHABLE' })
  })

  it('refuses a frame that breaks the protocol', () => {
    const { server } = pair({})
    assert.throws(() => server.receive(encodeFrame({ t: 'nonsense' }, [])))
    assert.throws(() => server.receive(new TextEncoder().encode('garbage')))
  })
})
