// Images straight from host to host: an agent serves its snapshots' images over HTTP to a peer
// holding a short-lived signature the control plane made with this agent's credential, and pulls
// one from a peer the same way; the bytes never cross the control plane.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { get, type IncomingMessage, type ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { AppError } from '@forkbox/protocol'
import type { ExportedImage } from '../sandboxes/image-transfer.ts'

export const IMAGE_PATH = '/v1/agent/images/'
const SHA_TRAILER = 'x-forkbox-sha256'
/** A signature is good for this long at most, whatever it says. */
const MAX_VALID_MS = 10 * 60_000

/** The signature a peer shows to read image `snapshotId` until `expires` (ms since the epoch). */
export function imageSignature(credential: string, snapshotId: string, expires: number): string {
  return createHmac('sha256', credential).update(`forkbox-image\0${snapshotId}\0${expires}`).digest('base64url')
}

/** Serves `GET /v1/agent/images/{id}?expires=&sig=`; false when the request is not one. */
export function serveImage(
  req: IncomingMessage,
  res: ServerResponse,
  opts: { credential: () => string | null; exportImage: (id: string) => Promise<ExportedImage> },
): boolean {
  const url = new URL(req.url ?? '/', 'http://agent')
  if (req.method !== 'GET' || !url.pathname.startsWith(IMAGE_PATH)) return false
  const id = url.pathname.slice(IMAGE_PATH.length)
  const expires = Number(url.searchParams.get('expires'))
  const sig = Buffer.from(url.searchParams.get('sig') ?? '')
  const credential = opts.credential()
  const now = Date.now()
  const good =
    credential !== null &&
    /^[A-Za-z0-9_-]{1,100}$/.test(id) &&
    Number.isSafeInteger(expires) &&
    expires > now &&
    expires - now <= MAX_VALID_MS &&
    (() => {
      const want = Buffer.from(imageSignature(credential, id, expires))
      return sig.length === want.length && timingSafeEqual(sig, want)
    })()
  if (!good) {
    res.writeHead(401).end()
    return true
  }
  opts.exportImage(id).then(
    (image) => {
      res.writeHead(200, {
        'content-type': 'application/x-tar',
        'x-forkbox-image-bytes': String(image.sizeBytes),
        trailer: SHA_TRAILER,
      })
      const body = Readable.fromWeb(image.stream as import('node:stream/web').ReadableStream<Uint8Array>)
      body.on('error', () => res.destroy())
      body.pipe(res, { end: false })
      body.on('end', () => {
        image.sha256.then(
          (sha) => {
            res.addTrailers({ [SHA_TRAILER]: sha })
            res.end()
          },
          () => res.destroy(),
        )
      })
    },
    (err: unknown) => {
      const status = err instanceof AppError && err.code === 'SNAPSHOT_NOT_FOUND' ? 404 : 500
      res.writeHead(status).end()
    },
  )
  return true
}

/** Reads an image a peer serves: its bytes as they come, and its SHA-256 once they all came. */
export function fetchImage(url: string): Promise<{ body: AsyncIterable<Uint8Array>; sha256: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = get(url, { timeout: 30_000 }, (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        const code = res.statusCode === 404 ? 'SNAPSHOT_NOT_FOUND' : 'HOST_UNREACHABLE'
        reject(new AppError(code, `the peer refused the image (${res.statusCode})`))
        return
      }
      const sha256 = new Promise<string>((ok, fail) => {
        res.once('end', () => {
          const sha = res.trailers[SHA_TRAILER]
          if (sha) ok(sha)
          else fail(new AppError('INTERNAL', 'the peer ended the image without its hash'))
        })
        res.once('error', fail)
        res.once('aborted', () => fail(new AppError('HOST_UNREACHABLE', 'the peer cut the image off')))
      })
      sha256.catch(() => {})
      resolve({ body: res, sha256 })
    })
    req.on('timeout', () => req.destroy(new Error('timed out')))
    req.on('error', (err) => reject(new AppError('HOST_UNREACHABLE', `the peer did not answer: ${err.message}`)))
  })
}
