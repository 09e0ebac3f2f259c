// Images straight from host to host: an agent serves its snapshots' images (and the rootfs of
// templates built on it) over HTTP (HTTPS when its advertised URL is, behind a TLS proxy) to a peer
// holding a short-lived signature the control plane made with this agent's credential, and pulls
// one from a peer the same way; the bytes never cross the control plane. The hash trailer is only
// a transport check: what a receiver keeps is checked against the control plane's record.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { get, type IncomingMessage, type ServerResponse } from 'node:http'
import { get as getTls } from 'node:https'
import { Readable } from 'node:stream'
import { AppError } from '@forkbox/protocol'
import type { ExportedImage } from '../sandboxes/image-transfer.ts'

export const IMAGE_PATH = '/v1/agent/images/'
export const ROOTFS_PATH = '/v1/agent/rootfs/'
const SHA_TRAILER = 'x-forkbox-sha256'
/** A signature is good for this long at most, whatever it says. */
const MAX_VALID_MS = 10 * 60_000

/** What a peer reads: a snapshot's image, or a built template's rootfs. */
export type ImageKind = 'image' | 'rootfs'

/** The signature a peer shows to read `id` (of `kind`) until `expires` (ms since the epoch). */
export function imageSignature(credential: string, id: string, expires: number, kind: ImageKind = 'image'): string {
  return createHmac('sha256', credential).update(`forkbox-${kind}\0${id}\0${expires}`).digest('base64url')
}

/** Turns for sending images: at most `n` at once on a host; more wait theirs (their pullers wait, not fail). */
export interface SendSlots {
  take(): Promise<() => void>
}

export function sendSlots(n: number): SendSlots {
  let free = n
  const waiting: (() => void)[] = []
  const release = () => {
    const next = waiting.shift()
    if (next) next()
    else free++
  }
  return {
    take() {
      if (free > 0) {
        free--
        return Promise.resolve(once(release))
      }
      return new Promise((resolve) => waiting.push(() => resolve(once(release))))
    },
  }
}

function once(fn: () => void): () => void {
  let done = false
  return () => {
    if (!done) {
      done = true
      fn()
    }
  }
}

/**
 * Serves `GET /v1/agent/images/{id}?expires=&sig=` (and `/v1/agent/rootfs/{name}`, a built
 * template's rootfs); false when the request is neither.
 */
export function serveImage(
  req: IncomingMessage,
  res: ServerResponse,
  opts: {
    credential: () => string | null
    exportImage: (id: string, skip: number) => Promise<ExportedImage>
    exportRootfs?: (name: string, skip: number) => Promise<ExportedImage>
    /** Sends at once (a spread fork's pulls all come to the source's host): unbounded without. */
    slots?: SendSlots
  },
): boolean {
  const url = new URL(req.url ?? '/', 'http://agent')
  const kind: ImageKind | null = url.pathname.startsWith(IMAGE_PATH)
    ? 'image'
    : url.pathname.startsWith(ROOTFS_PATH) && opts.exportRootfs
      ? 'rootfs'
      : null
  if (req.method !== 'GET' || !kind) return false
  const id = url.pathname.slice((kind === 'image' ? IMAGE_PATH : ROOTFS_PATH).length)
  const expires = Number(url.searchParams.get('expires'))
  // a resumed pull: the stream from this byte on (the signature covers the image, any part of it)
  const offset = Number(url.searchParams.get('offset') ?? 0)
  const sig = Buffer.from(url.searchParams.get('sig') ?? '')
  const credential = opts.credential()
  const now = Date.now()
  const good =
    credential !== null &&
    /^[A-Za-z0-9_-]{1,100}$/.test(id) &&
    Number.isSafeInteger(expires) &&
    Number.isSafeInteger(offset) &&
    offset >= 0 &&
    expires > now &&
    expires - now <= MAX_VALID_MS &&
    (() => {
      const want = Buffer.from(imageSignature(credential, id, expires, kind))
      return sig.length === want.length && timingSafeEqual(sig, want)
    })()
  if (!good) {
    res.writeHead(401).end()
    return true
  }
  const turn = opts.slots ? opts.slots.take() : Promise.resolve(() => {})
  turn
    .then((release) => {
      res.once('close', release)
      // a puller that gave up while it waited
      if (res.destroyed) return release()
      const exported =
        kind === 'rootfs' && opts.exportRootfs ? opts.exportRootfs(id, offset) : opts.exportImage(id, offset)
      return send(res, exported)
    })
    .catch(() => res.destroy())
  return true
}

function send(res: ServerResponse, exported: Promise<ExportedImage>): Promise<void> {
  return exported.then(
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
      const missing =
        err instanceof AppError && (err.code === 'SNAPSHOT_NOT_FOUND' || err.code === 'TEMPLATE_UNAVAILABLE')
      const status = missing ? 404 : 500
      res.writeHead(status).end()
    },
  )
}

/** How often a cut pull is resumed before it fails. */
const RESUMES = 5

/** One GET of the image from byte `offset` on: the response, once its status says it is the image. */
function requestImage(url: string, offset: number): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const target = offset > 0 ? `${url}&offset=${offset}` : url
    // an https peer's certificate is checked against Node's CAs (NODE_EXTRA_CA_CERTS for a private one)
    const request = target.startsWith('https:') ? getTls : get
    const req = request(target, { timeout: 30_000 }, (res) => {
      if (res.statusCode === 200) return resolve(res)
      res.resume()
      const code = res.statusCode === 404 ? 'SNAPSHOT_NOT_FOUND' : 'HOST_UNREACHABLE'
      reject(new AppError(code, `the peer refused the image (${res.statusCode})`))
    })
    req.on('timeout', () => req.destroy(new Error('timed out')))
    // a connection cut before the answer (not refused: no one listening fails at once) is worth asking again
    req.on('error', (err: NodeJS.ErrnoException) => {
      const cut = err.code === 'ECONNRESET' || err.message === 'timed out'
      reject(new AppError('HOST_UNREACHABLE', `the peer did not answer: ${err.message}`, cut ? { cut } : undefined))
    })
  })
}

/**
 * Reads an image a peer serves: its bytes as they come, and its SHA-256 once they all came. A
 * transfer cut midway is resumed from the byte it reached (up to 5 times), not begun again.
 */
export async function fetchImage(url: string): Promise<{ body: AsyncIterable<Uint8Array>; sha256: Promise<string> }> {
  let settle!: { resolve(h: string): void; reject(e: unknown): void }
  const sha256 = new Promise<string>((resolve, reject) => {
    settle = { resolve, reject }
  })
  sha256.catch(() => {})
  // the first answer is awaited here: a refusal (404, a bad signature) or a peer no one answers
  // for fails the call itself; a connection cut before the answer is tried again, as a cut
  // transfer is
  let res: IncomingMessage | null = null
  for (let attempt = 1; !res; attempt++) {
    try {
      res = await requestImage(url, 0)
    } catch (err) {
      if (!(err instanceof AppError && err.details?.cut) || attempt > RESUMES) throw err
      await new Promise((r) => setTimeout(r, 200 * attempt))
    }
  }
  const body = async function* () {
    let received = 0
    for (let resumes = 0; ; ) {
      try {
        res ??= await requestImage(url, received)
        const ended = new Promise<void>((ok, fail) => {
          ;(res as IncomingMessage).once('end', ok)
          ;(res as IncomingMessage).once('aborted', () => fail(new Error('the peer cut the image off')))
        })
        ended.catch(() => {})
        for await (const c of res as AsyncIterable<Buffer>) {
          received += c.length
          yield c
        }
        await ended
        const sha = res.trailers[SHA_TRAILER]
        if (!sha) throw new Error('the image ended without its hash')
        settle.resolve(sha)
        return
      } catch (err) {
        res?.destroy()
        res = null
        if (err instanceof AppError && err.code === 'SNAPSHOT_NOT_FOUND') {
          settle.reject(err)
          throw err
        }
        if (++resumes > RESUMES) {
          const e = new AppError(
            'HOST_UNREACHABLE',
            `the image transfer broke off ${RESUMES + 1} times: ${String(err)}`,
          )
          settle.reject(e)
          throw e
        }
        await new Promise((r) => setTimeout(r, 200 * resumes))
      }
    }
  }
  const guarded = async function* () {
    try {
      yield* body()
    } finally {
      // a reader that stopped early (a bad entry, a full disk) ends the transfer
      res?.destroy()
    }
  }
  return { body: guarded(), sha256 }
}
