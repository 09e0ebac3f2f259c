// The other end's streams and iterators as local ones: values pulled ahead over the channel, a
// cancel sent once, the end seen once.

/** Pulls of one stream under way at once (each value is at most a frame: a few MiB in flight). */
const READ_AHEAD = 4

/** A stream or iterator the other end exported, as this side reaches it. */
export interface RemoteSource {
  /** Asks the other end for the next value: one round trip. */
  pull(): Promise<IteratorResult<unknown>>
  /** Tells the other end to stop it (sent at most once, and never after its end). */
  cancel(): void
}

/**
 * The next values of `source`, with up to READ_AHEAD pulls under way: each is a round trip, so a
 * bulk transfer would otherwise wait on every one in turn.
 */
function readAhead(source: RemoteSource): () => Promise<IteratorResult<unknown>> {
  const queue: Promise<IteratorResult<unknown>>[] = []
  let sawEnd = false
  return () => {
    while (!sawEnd && queue.length < READ_AHEAD) {
      const p = source.pull().then((r) => {
        if (r.done) sawEnd = true
        return r
      })
      // pulls sent past the end are answered with an error nobody reads
      p.catch(() => {})
      queue.push(p)
    }
    return queue.shift() ?? Promise.resolve({ done: true, value: undefined })
  }
}

/** The other end's async iterator, as an async iterable read once. */
export function importedIterable(source: RemoteSource): AsyncIterable<unknown> {
  let ended = false
  const end = () => {
    ended = true
  }
  const read = readAhead(source)
  return {
    [Symbol.asyncIterator]: () => ({
      next: async () => {
        if (ended) return { done: true, value: undefined }
        try {
          const r = await read()
          if (r.done) end()
          return r
        } catch (err) {
          end()
          throw err
        }
      },
      return: async () => {
        if (!ended) source.cancel()
        end()
        return { done: true, value: undefined }
      },
    }),
  }
}

/** The other end's stream, as a stream that reads only when read; `onEnd` runs once when it ends, fails or is cancelled. */
export function importedStream(source: RemoteSource, onEnd: () => void): ReadableStream<unknown> {
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    onEnd()
  }
  const read = readAhead(source)
  return new ReadableStream(
    {
      pull: async (controller) => {
        try {
          const r = await read()
          if (r.done) {
            end()
            controller.close()
          } else controller.enqueue(r.value)
        } catch (err) {
          end()
          controller.error(err)
        }
      },
      cancel: () => {
        if (!ended) source.cancel()
        end()
      },
    },
    { highWaterMark: 0 },
  )
}
