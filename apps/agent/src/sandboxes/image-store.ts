// A shared image store: a directory on storage every host of a fleet mounts (NFS, CephFS, ...).
// Snapshots' and hibernated sandboxes' images are kept there as well as on their host, so one
// whose host is gone is still restored anywhere. Each image is `{id}.tar` (the export stream) and
// `{id}.sha256`; the hash file is written last, so an image without one is not there yet.
// The store's identity (`forkbox-store.json`) tells the control plane which hosts share it.
import { randomBytes } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { readFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { AppError } from '@forkbox/protocol'
import type { ExportedImage } from './image-transfer.ts'

const ID_FILE = 'forkbox-store.json'
const IMAGE_ID = /^[A-Za-z0-9_-]{1,100}$/
/** A half-written image older than this was left by a host that died while writing it. */
const ABANDONED_MS = 3600_000

export class ImageStore {
  /** The same for every host that mounts this store. */
  readonly id: string

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.id = storeIdentity(dir)
  }

  private paths(snapshotId: string): { tar: string; sha: string } {
    if (!IMAGE_ID.test(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${snapshotId}`)
    return { tar: join(this.dir, `${snapshotId}.tar`), sha: join(this.dir, `${snapshotId}.sha256`) }
  }

  has(snapshotId: string): boolean {
    return existsSync(this.paths(snapshotId).sha)
  }

  /** Writes `image` into the store (nothing when it is there already). */
  async put(snapshotId: string, image: ExportedImage): Promise<void> {
    const { tar, sha } = this.paths(snapshotId)
    if (existsSync(sha)) {
      await image.stream.cancel().catch(() => {})
      return
    }
    const tmp = `${tar}.part-${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`
    try {
      await pipeline(
        Readable.fromWeb(image.stream as import('node:stream/web').ReadableStream<Uint8Array>),
        createWriteStream(tmp, { mode: 0o600 }),
      )
      const hash = await image.sha256
      renameSync(tmp, tar)
      writeFileSync(`${sha}.part`, hash, { mode: 0o600 })
      renameSync(`${sha}.part`, sha)
    } finally {
      rmSync(tmp, { force: true })
    }
  }

  /** The image's stream and hash, for `importImage`. */
  async get(snapshotId: string): Promise<{ body: AsyncIterable<Uint8Array>; sha256: Promise<string> }> {
    const { tar, sha } = this.paths(snapshotId)
    const hash = await readFile(sha, 'utf8').catch(() => null)
    if (hash === null) throw new AppError('SNAPSHOT_NOT_FOUND', `snapshot ${snapshotId} is not in the image store`)
    return { body: createReadStream(tar, { highWaterMark: 1024 * 1024 }), sha256: Promise.resolve(hash.trim()) }
  }

  drop(snapshotId: string): void {
    const { tar, sha } = this.paths(snapshotId)
    rmSync(sha, { force: true })
    rmSync(tar, { force: true })
  }

  /** Removes images not in `keep`, and half-written ones a dead writer left (older than an hour). */
  prune(keep: string[]): void {
    const wanted = new Set(keep)
    const now = Date.now()
    for (const name of readdirSync(this.dir)) {
      if (name === ID_FILE) continue
      const path = join(this.dir, name)
      const m = /^([A-Za-z0-9_-]+)\.(tar|sha256)$/.exec(name)
      if (m) {
        if (!wanted.has(m[1] as string)) rmSync(path, { force: true })
      } else if (now - statSync(path).mtimeMs > ABANDONED_MS) rmSync(path, { force: true })
    }
  }
}

/** The store's id: made by the first host to mount it (a link makes exactly one win), read by the rest. */
function storeIdentity(dir: string): string {
  const file = join(dir, ID_FILE)
  if (!existsSync(file)) {
    const tmp = `${file}.${process.pid}-${randomBytes(4).toString('hex')}`
    writeFileSync(tmp, JSON.stringify({ id: `store-${randomBytes(8).toString('hex')}` }), { mode: 0o600 })
    try {
      linkSync(tmp, file)
    } catch {
      // another host made it first
    } finally {
      rmSync(tmp, { force: true })
    }
  }
  const { id } = JSON.parse(readFileSync(file, 'utf8')) as { id?: unknown }
  if (typeof id !== 'string' || !/^[a-z0-9-]{1,64}$/.test(id)) throw new Error(`${file} does not name an image store`)
  return id
}
