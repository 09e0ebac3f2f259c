// Images between hosts: snapshots' images exported to and imported from the control plane, pulled
// from a peer or the shared image store, and built templates' rootfs served to and pulled from a
// peer. What a pull keeps is checked against the control plane's record of its hash.
import { join } from 'node:path'
import { AppError, type ImageSource, SHA256_HEX } from '@forkbox/protocol'
import type { Checkpoints } from '../sandboxes/checkpoints.ts'
import type { ImageStore } from '../sandboxes/image-store.ts'
import { digestOf, expectedDigest } from '../sandboxes/image-transfer.ts'
import { tempName } from '../templates/layers.ts'
import { BUILT_ROOTFS, exportRootfs, importRootfs } from '../templates/rootfs-transfer.ts'
import { fetchImage } from './images.ts'

export interface ImageExchangeOptions {
  checkpoints: Checkpoints
  /** The shared image store, when this host mounts one. */
  imageStore: ImageStore | null
  /** Where built templates' rootfs live. */
  templatesDir: string
  /** Where a pulled rootfs is unpacked first (the layer store's root: a pull cut by a crash is removed at the next start). */
  scratchDir: string
  log: (message: string) => void
}

export class ImageExchange {
  /** Pulls of built templates' rootfs under way, by name: a second caller waits for the first. */
  private readonly rootfsPulls = new Map<string, Promise<void>>()

  constructor(private readonly opts: ImageExchangeOptions) {}

  /** A snapshot's hash: of the stream another host would get, read once here. */
  digest(snapshotId: string): Promise<string> {
    return digestOf(this.opts.checkpoints.exportSnapshot(snapshotId))
  }

  exportSnapshot(snapshotId: string, skip = 0) {
    return this.opts.checkpoints.exportSnapshot(snapshotId, skip)
  }

  importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>): Promise<void> {
    // relayed by the control plane, with its record of the image (the exporter's hash for an older one)
    return this.opts.checkpoints.importSnapshot(snapshotId, body, { sha256, source: 'sender' })
  }

  async pullSnapshot(snapshotId: string, from: ImageSource): Promise<void> {
    const { checkpoints, imageStore } = this.opts
    const recorded = recordedDigest(from.sha256)
    if ('url' in from) {
      const { body, sha256 } = await fetchImage(from.url)
      return checkpoints.importSnapshot(snapshotId, body, expectedDigest(recorded, sha256))
    }
    if (!imageStore) throw new AppError('SNAPSHOT_NOT_FOUND', 'this host mounts no image store')
    // the store is written by every host mounting it: its own hash file proves nothing
    const { body, sha256 } = await imageStore.get(snapshotId)
    await checkpoints.importSnapshot(snapshotId, body, expectedDigest(recorded, sha256))
  }

  pullRootfs(rootfs: string, from: { url: string; sha256: string | null }): Promise<void> {
    if (!BUILT_ROOTFS.test(rootfs))
      return Promise.reject(new AppError('VALIDATION_FAILED', `not a template image name: ${rootfs}`))
    let recorded: string | null
    try {
      recorded = recordedDigest(from.sha256)
    } catch (err) {
      return Promise.reject(err)
    }
    let pull = this.rootfsPulls.get(rootfs)
    if (!pull) {
      pull = (async () => {
        const started = performance.now()
        const { body, sha256 } = await fetchImage(from.url)
        const dir = join(this.opts.templatesDir, rootfs)
        // unpacked under the layer store's root: a pull cut by a crash is removed at the next start
        const expected = expectedDigest(recorded, sha256)
        const bytes = await importRootfs(dir, join(this.opts.scratchDir, tempName()), body, expected)
        this.opts.log(
          `template image ${rootfs} pulled from a peer: ${bytes} bytes in ${Math.round(performance.now() - started)} ms`,
        )
      })().finally(() => this.rootfsPulls.delete(rootfs))
      this.rootfsPulls.set(rootfs, pull)
    }
    return pull
  }

  /** A built template's rootfs (`built-…`) as a tar stream from byte `skip` on, for a peer pulling it. */
  exportRootfs(rootfs: string, skip = 0) {
    return exportRootfs(join(this.opts.templatesDir, rootfs), skip)
  }

  async storeSnapshot(snapshotId: string): Promise<boolean> {
    const { imageStore } = this.opts
    if (!imageStore) return false
    await imageStore.put(snapshotId, this.opts.checkpoints.exportSnapshot(snapshotId))
    return true
  }

  /** The shared image store's id, when this host mounts one. */
  get imageStoreId(): string | undefined {
    return this.opts.imageStore?.id
  }

  async deleteSnapshot(snapshotId: string, opts: { stored?: boolean } = {}): Promise<void> {
    if (opts.stored) this.opts.imageStore?.drop(snapshotId)
    await this.opts.checkpoints.deleteSnapshot(snapshotId)
  }

  async pruneSnapshots(keep: string[]): Promise<void> {
    this.opts.imageStore?.prune(keep)
    await this.opts.checkpoints.pruneSnapshots(keep)
  }
}

/** The control plane's record of an image's hash, as a pull names it (null: an image older than records). */
function recordedDigest(sha256: unknown): string | null {
  if (sha256 === null || sha256 === undefined) return null
  if (typeof sha256 !== 'string' || !SHA256_HEX.test(sha256))
    throw new AppError('VALIDATION_FAILED', 'an image pull names a malformed sha256')
  return sha256
}
