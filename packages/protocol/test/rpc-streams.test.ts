// The other end's streams and iterators made local: pulls kept ahead, a cancel sent once and never
// after the end, a stream's end seen once.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { importedIterable, importedStream, type RemoteSource } from '../src/rpc-streams.ts'

/** A source of `values` that counts pulls and cancels; gated, pulls answer only when `answer` is called. */
function source(values: unknown[], gated = false) {
  const pending: (() => void)[] = []
  let at = 0
  const seen = { pulls: 0, cancels: 0 }
  const s: RemoteSource = {
    pull: () => {
      seen.pulls++
      const i = at++
      const r: IteratorResult<unknown> =
        i < values.length ? { done: false, value: values[i] } : { done: true, value: undefined }
      if (!gated) return Promise.resolve(r)
      return new Promise((resolve) => pending.push(() => resolve(r)))
    },
    cancel: () => {
      seen.cancels++
    },
  }
  const answer = () => {
    for (const f of pending.splice(0)) f()
  }
  return { s, seen, answer }
}

describe('imported iterables and streams', () => {
  it('keeps a few pulls under way, and reads the values in order', async () => {
    const { s, seen, answer } = source(['a', 'b'], true)
    const it = importedIterable(s)[Symbol.asyncIterator]()
    const first = it.next()
    assert.equal(seen.pulls, 4, 'pulls ahead of the reader')
    answer()
    assert.deepEqual(await first, { done: false, value: 'a' })
    assert.deepEqual(await it.next(), { done: false, value: 'b' })
    assert.deepEqual(await it.next(), { done: true, value: undefined })
    assert.equal(seen.pulls, 4, 'none past the end')
    await it.return?.()
    assert.equal(seen.cancels, 0, 'no cancel after the end')
  })

  it('a stream cancelled early tells the other end once, and ends once', async () => {
    const { s, seen } = source(['a', 'b', 'c', 'd', 'e', 'f'])
    let ends = 0
    const reader = importedStream(s, () => ends++).getReader()
    assert.deepEqual(await reader.read(), { done: false, value: 'a' })
    await reader.cancel()
    assert.deepEqual([seen.cancels, ends], [1, 1])
  })

  it('a stream read to its end ends once and sends no cancel', async () => {
    const { s, seen } = source(['x'])
    let ends = 0
    const reader = importedStream(s, () => ends++).getReader()
    const out: unknown[] = []
    for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(r.value)
    assert.deepEqual(out, ['x'])
    assert.deepEqual([seen.cancels, ends], [0, 1])
  })
})
