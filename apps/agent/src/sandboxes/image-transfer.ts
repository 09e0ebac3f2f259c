// A snapshot's image as one stream (a tar of its files) with its SHA-256, and back: how images
// move between hosts. An import is written beside its place and renamed there only once its bytes
// match the hash the control plane recorded when the image was made (the sender's own only for an
// image older than such records), so a cut, corrupted or forged transfer never becomes an image.
import { createHash } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { AppError } from '@forkbox/protocol'
import { extract, pack } from 'tar-stream'

const CHUNK_BYTES = 1024 * 1024
const EPOCH = new Date(0)

/** Image files are flat, named by runsc: nothing else is taken in. */
const FILE_NAME = /^[A-Za-z0-9._-]{1,128}$/

export interface ExportedImage {
  sizeBytes: number
  stream: ReadableStream<Uint8Array>
  /** Settles once the stream has been read to its end. */
  sha256: Promise<string>
}

/**
 * The image in `dir` as a tar stream. The stream is the same bytes every time (names in order, no
 * times, no owners), so a cut transfer resumes with `skip`: the bytes already sent are made again
 * (and hashed: the hash is always the whole stream's) but not sent.
 */
export function exportImage(dir: string, skip = 0): ExportedImage {
  if (!existsSync(dir)) throw new AppError('SNAPSHOT_NOT_FOUND', 'no such image on this host')
  const files = readdirSync(dir)
    .filter((f) => FILE_NAME.test(f) && statSync(join(dir, f)).isFile())
    .sort()
  const sizeBytes = files.reduce((n, f) => n + statSync(join(dir, f)).size, 0)
  const tar = pack()
  ;(async () => {
    for (const f of files) {
      const size = statSync(join(dir, f)).size
      const entry = tar.entry({ name: f, size, mode: 0o600, mtime: EPOCH, uid: 0, gid: 0 })
      await pipeline(createReadStream(join(dir, f), { highWaterMark: CHUNK_BYTES }), entry)
    }
    tar.finalize()
  })().catch((err: unknown) => tar.destroy(err instanceof Error ? err : new Error(String(err))))
  return { sizeBytes, ...hashedStream(tar as AsyncIterable<Buffer>, skip) }
}

/**
 * `source` as a stream of chunks of a MiB or more (each is a round trip when the bytes cross the
 * control plane), without its first `skip` bytes, and the SHA-256 of all of it (skipped bytes
 * included) once it was read to its end.
 */
export function hashedStream(
  source: AsyncIterable<Buffer>,
  skip: number,
): { stream: ReadableStream<Uint8Array>; sha256: Promise<string> } {
  const hash = createHash('sha256')
  let settle!: { resolve(h: string): void; reject(e: Error): void }
  const sha256 = new Promise<string>((resolve, reject) => {
    settle = { resolve, reject }
  })
  sha256.catch(() => {})
  const hashed = async function* () {
    try {
      let batch: Buffer[] = []
      let batched = 0
      let toSkip = skip
      for await (const whole of source) {
        hash.update(whole)
        const c = toSkip >= whole.length ? null : whole.subarray(toSkip)
        toSkip = Math.max(0, toSkip - whole.length)
        if (!c) continue
        batch.push(c)
        batched += c.length
        if (batched >= CHUNK_BYTES) {
          yield Buffer.concat(batch)
          batch = []
          batched = 0
        }
      }
      if (batched > 0) yield Buffer.concat(batch)
      settle.resolve(hash.digest('hex'))
    } catch (err) {
      settle.reject(err instanceof Error ? err : new Error(String(err)))
      throw err
    }
  }
  return { stream: Readable.toWeb(Readable.from(hashed())) as ReadableStream<Uint8Array>, sha256 }
}

/** The SHA-256 of an exported image's whole stream (read to its end for it). */
export async function digestOf(image: ExportedImage): Promise<string> {
  const reader = image.stream.getReader()
  try {
    while (!(await reader.read()).done) {}
  } finally {
    reader.releaseLock()
  }
  return image.sha256
}

/**
 * The hash an import must match: the control plane's record of the image (made when its holder
 * made it) when there is one, else the hash its sender sends. `source` names it in a refusal.
 */
export interface ExpectedDigest {
  sha256: Promise<string>
  source: 'record' | 'sender'
}

export function expectedDigest(recorded: string | null | undefined, sent: Promise<string>): ExpectedDigest {
  return recorded ? { sha256: Promise.resolve(recorded), source: 'record' } : { sha256: sent, source: 'sender' }
}

/** The refusal of a transfer whose bytes hash to `got`, not `want`. */
export function digestMismatch(what: string, got: string, want: string, source: ExpectedDigest['source']): AppError {
  const whose =
    source === 'record'
      ? `the control plane recorded ${want} when its holder made it`
      : `its sender says ${want} (corrupted on the way)`
  return new AppError('INTERNAL', `${what} transfer refused: its bytes hash to sha256 ${got}, but ${whose}`, {
    expected: want,
    got,
    source,
  })
}

/** Writes the image from `body` to `dir` once its bytes hash to what `expected` says. */
export async function importImage(
  dir: string,
  body: AsyncIterable<Uint8Array>,
  expected: ExpectedDigest,
): Promise<number> {
  const tmp = `${dir}.tmp-${process.pid}`
  rmSync(tmp, { recursive: true, force: true })
  return importChecked(dir, tmp, body, expected, 'image', async (bytes) => {
    const untar = extract()
    untar.on('entry', (header, stream, next) => {
      if (header.type !== 'file' || !FILE_NAME.test(header.name)) {
        stream.resume()
        untar.destroy(new AppError('VALIDATION_FAILED', `an image holds only flat files, not ${header.name}`))
        return
      }
      pipeline(stream, createWriteStream(join(tmp, header.name), { mode: 0o600 })).then(() => next(), next)
    })
    await pipeline(Readable.from(bytes), untar)
  })
}

/**
 * Unpacks `body` into the new dir `tmp` with `unpack` (each chunk hashed on its way there), then
 * renames `tmp` to `dir` once the bytes hash to what `expected` says; on any failure `tmp` goes.
 * Resolves with the bytes read (0: `dir` was there already). `what` names the transfer in the
 * error a refused one gets. Only for what is safe to write before the check: flat files in a dir
 * only this process reads.
 */
async function importChecked(
  dir: string,
  tmp: string,
  body: AsyncIterable<Uint8Array>,
  expected: ExpectedDigest,
  what: string,
  unpack: (bytes: AsyncIterable<Uint8Array>) => Promise<void>,
): Promise<number> {
  if (existsSync(dir)) return 0
  mkdirSync(tmp, { recursive: true, mode: 0o700 })
  const hash = createHash('sha256')
  let bytes = 0
  try {
    await unpack(
      (async function* () {
        for await (const c of body) {
          hash.update(c)
          bytes += c.length
          yield c
        }
      })(),
    )
    const want = await expected.sha256
    const got = hash.digest('hex')
    if (got !== want) throw digestMismatch(what, got, want, expected.source)
    if (existsSync(dir)) rmSync(tmp, { recursive: true, force: true })
    else renameSync(tmp, dir)
    return bytes
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true })
    throw err
  }
}
