// A build context as the bytes the server takes: a directory tarred as it is read (where the
// runtime has a file system), or a tar the caller already has.
import { tarDirectory } from './platform/index.ts'

/**
 * A directory path (tarred with every file in it), a tar archive in memory, or a stream of tar
 * bytes (a web ReadableStream, or a Node Readable or any async iterable of chunks).
 */
export type BuildContext = string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>

/**
 * Bytes in memory stay bytes (a request with them can be retried); anything else streams.
 * `onError` hears why a directory or iterable could not be read (fetch reports only that the
 * request failed).
 */
export function contextBody(
  context: BuildContext,
  onError: (err: unknown) => void = () => {},
): Uint8Array | ReadableStream<Uint8Array> {
  if (typeof context === 'string') return streamOf(tarDirectory(context), onError)
  if (context instanceof Uint8Array || context instanceof ReadableStream) return context
  return streamOf(context, onError)
}

function streamOf(chunks: AsyncIterable<Uint8Array>, onError: (err: unknown) => void): ReadableStream<Uint8Array> {
  const it = chunks[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await it.next()
        if (done) controller.close()
        else controller.enqueue(value)
      } catch (err) {
        onError(err)
        throw err
      }
    },
    async cancel(reason) {
      await it.return?.(reason)
    },
  })
}
