// An upload body as it arrives, never held whole: one byte cap for every upload route (forkbox's
// PUT /files, envd's POST /files), and a multipart body cut into its `file` parts, each handed on
// as a stream while the next waits in the socket.
import { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream as NodeReadableStream } from 'node:stream/web'
import { AppError } from '@forkbox/protocol'
import busboy from 'busboy'

const tooLarge = (what: string, maxBytes: number) =>
  new AppError('PAYLOAD_TOO_LARGE', `${what} is larger than the ${maxBytes}-byte upload limit`)

/** Passes at most `maxBytes`; one byte more errors the stream with PAYLOAD_TOO_LARGE. */
export function capped(maxBytes: number, what = 'upload'): Transform {
  let seen = 0
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length
      if (seen > maxBytes) cb(tooLarge(what, maxBytes))
      else cb(null, chunk)
    },
  })
}

/**
 * A request's body as it arrives, at most `maxBytes` (a larger Content-Length is refused before a
 * byte is read). A client that goes away mid-body errors it with CANCELLED: the write it feeds is
 * abandoned (the guest drops its temp file), never committed cut short.
 */
export function uploadBody(req: Request, maxBytes: number, what = 'upload'): Readable {
  const declared = Number(req.headers.get('content-length') ?? 0)
  if (declared > maxBytes) throw tooLarge(what, maxBytes)
  const out = capped(maxBytes, what)
  if (!req.body) {
    out.end()
    return out
  }
  const raw = Readable.fromWeb(req.body as NodeReadableStream)
  raw.on('error', () => out.destroy(new AppError('CANCELLED', 'the upload was cut off before its end')))
  out.on('close', () => raw.destroy())
  raw.pipe(out)
  return out
}

export interface MultipartOptions {
  contentType: string
  /** Largest file part. */
  maxFileBytes: number
  /** Most `file` parts in one body. */
  maxFiles: number
  /** The path of the first file (envd's `?path=`); later ones, and without it every one, use their filename. */
  firstPath?: string
}

/** Form fields are tiny in an envd upload; anything larger is not one of its clients. */
const MAX_FIELDS = 32
const MAX_FIELD_BYTES = 64 * 1024
const MAX_HEADER_PAIRS = 64

/** What a failed body stream means to the client, if it is the body's fault: too large, or not gzip. */
export function bodyError(err: unknown): AppError | null {
  if (err instanceof AppError) return err
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code.startsWith('Z_'))
    return new AppError('VALIDATION_FAILED', `the gzip-encoded body does not decode: ${(err as Error).message}`)
  return null
}

function malformed(err: unknown): AppError {
  const known = bodyError(err)
  if (known) return known
  const why = err instanceof Error ? err.message : String(err)
  return new AppError('VALIDATION_FAILED', `malformed multipart/form-data body: ${why}`)
}

/**
 * Calls `put` for each `file` part of the body in turn, with the part's bytes as they arrive; the
 * parser waits while `put` is slow (backpressure to the client). A part over the size limit errors
 * its stream (so `put` fails rather than writing a cut file), and a malformed body fails the call
 * with VALIDATION_FAILED.
 */
export async function eachFilePart<T>(
  body: Readable,
  opts: MultipartOptions,
  put: (path: string, data: Readable) => Promise<T>,
): Promise<T[]> {
  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: { 'content-type': opts.contentType },
      limits: {
        fileSize: opts.maxFileBytes,
        files: opts.maxFiles,
        fields: MAX_FIELDS,
        fieldSize: MAX_FIELD_BYTES,
        headerPairs: MAX_HEADER_PAIRS,
      },
      // envd clients name each part by its full path in the sandbox
      preservePath: true,
    })
  } catch (err) {
    body.destroy()
    throw malformed(err)
  }
  const queue: { path: string; data: Readable }[] = []
  let current: Readable | null = null
  let failure: AppError | null = null
  let done = false
  let wake: (() => void) | null = null
  const poke = () => {
    const w = wake
    wake = null
    w?.()
  }
  const fail = (err: unknown) => {
    failure ??= malformed(err)
    current?.destroy(failure)
    poke()
  }
  let first = true
  parser.on('file', (field, data, info) => {
    // the parser errors a part's stream when the body breaks off; its reader (if any) sees that
    // through its own iteration, and a skipped part must not make it an uncaught error
    data.on('error', () => {})
    if (field !== 'file' || failure) {
      data.resume()
      return
    }
    const path = first && opts.firstPath ? opts.firstPath : info.filename
    first = false
    if (!path) {
      data.resume()
      fail(new AppError('VALIDATION_FAILED', 'a `file` part has no filename and the upload names no path'))
      return
    }
    data.on('limit', () =>
      fail(new AppError('PAYLOAD_TOO_LARGE', `file ${path} is larger than ${opts.maxFileBytes} bytes`)),
    )
    queue.push({ path, data })
    poke()
  })
  parser.on('filesLimit', () =>
    fail(new AppError('VALIDATION_FAILED', `an upload carries at most ${opts.maxFiles} files`)),
  )
  parser.on('fieldsLimit', () =>
    fail(new AppError('VALIDATION_FAILED', `too many form fields (at most ${MAX_FIELDS})`)),
  )
  // 'error' reaches the pipeline, which rejects with it; the listener keeps an error emitted after
  // the pipeline settled from being unhandled
  parser.on('error', fail)
  pipeline(body, parser).then(() => {
    done = true
    poke()
  }, fail)

  const out: T[] = []
  try {
    for (;;) {
      if (failure) throw failure
      const next = queue.shift()
      if (next) {
        current = next.data
        try {
          out.push(await put(next.path, next.data))
        } catch (err) {
          // the body's own failure (cut, too large) is the cause, not what the write made of it
          throw failure ?? err
        } finally {
          current = null
        }
        continue
      }
      if (done) break
      await new Promise<void>((resolve) => {
        wake = resolve
      })
    }
  } finally {
    if (!done) {
      const why = failure ?? new AppError('CANCELLED', 'upload abandoned')
      for (const q of queue.splice(0)) q.data.destroy(why)
      parser.destroy(why)
      body.destroy()
    }
  }
  if (out.length === 0) throw new AppError('VALIDATION_FAILED', 'no `file` part in the upload')
  return out
}
