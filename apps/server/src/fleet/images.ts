// Images between hosts: copied from the holder (pulled straight by the receiver, else relayed
// through this replica), or from the shared image store when the holder is gone; written to the
// store in the background after a snapshot or a hibernation. Every copy is checked by its receiver
// against the hash recorded when the image was made (`HostStore.digestOf`, `rootfsCopies`), never
// against what the sender says, so a host (or anyone on the agents' network) cannot feed another a
// changed image.
import { createHmac } from 'node:crypto'
import { AppError, type HostCapacity } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { HostRow, HostStore } from './hosts-store.ts'
import { hostCredential, type Links } from './links.ts'

/** How long an agent may use the URL it is given to pull an image from a peer. */
const IMAGE_URL_VALID_MS = 5 * 60_000

/** How many hosts a template image is asked of before the copy fails. */
const ROOTFS_HOLDERS_TRIED = 8

/**
 * What a peer shows the holding agent to read `id` until `expires` (the agent checks the same
 * HMAC): a snapshot's image, or (`rootfs`) a built template's rootfs.
 */
export function imageSignature(
  credential: string,
  id: string,
  expires: number,
  kind: 'image' | 'rootfs' = 'image',
): string {
  return createHmac('sha256', credential).update(`forkbox-${kind}\0${id}\0${expires}`).digest('base64url')
}

/** The template image a call failed for lack of on its host (`TEMPLATE_UNAVAILABLE` from an agent), if that is why. */
export function missingTemplateImage(err: unknown): { rootfs: string; template: string } | null {
  if (!(err instanceof AppError) || err.code !== 'TEMPLATE_UNAVAILABLE') return null
  const { rootfs, template } = err.details ?? {}
  return typeof rootfs === 'string' && typeof template === 'string' ? { rootfs, template } : null
}

/** The shared image store a host mounts (its id), if any. */
function storeOf(row: HostRow): string | undefined {
  return (JSON.parse(row.capacity) as HostCapacity).imageStore
}

/** Whether two hosts mount the same image store. */
function sameStore(a: HostRow, b: HostRow): boolean {
  const store = storeOf(a)
  return store !== undefined && store === storeOf(b)
}

async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader()
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) yield r.value
  } finally {
    reader.releaseLock()
  }
}

export class Images {
  constructor(
    private readonly links: Links,
    private readonly hosts: HostStore,
    private readonly secret: Buffer,
    private readonly log: Logger,
  ) {}

  /**
   * Copies a snapshot's image from one host to another, hash-checked by the receiver: pulled by
   * it straight from the holder (signed for a few minutes with the holder's credential), or, when
   * that fails, relayed through this control plane.
   */
  async copyImage(snapshotId: string, from: string, to: string): Promise<void> {
    const rows = await this.links.rows()
    const holder = rows.find((r) => r.id === from) ?? (await this.hosts.get(from))
    const target = rows.find((r) => r.id === to)
    const shared = holder !== undefined && target !== undefined && sameStore(holder, target)
    // a silent holder is not waited for when the image store has the image
    if (shared && !this.links.isFresh(holder)) return this.pullStored(snapshotId, to)
    try {
      await this.copyFromHolder(snapshotId, holder, from, to)
    } catch (err) {
      if (!shared) throw err
      this.log.warn(
        { snapshotId, from, to, err: String(err) },
        'the image holder failed; pulling it from the image store',
      )
      await this.pullStored(snapshotId, to).catch(() => {
        throw err
      })
    }
  }

  /** The recorded hash a copy of `snapshotId` must match (null, with a warning: an image older than records). */
  private async recorded(snapshotId: string): Promise<string | null> {
    const sha256 = await this.hosts.digestOf(snapshotId)
    if (!sha256)
      this.log.warn({ snapshotId }, 'no hash was recorded for this image: its copy is checked against its sender alone')
    return sha256
  }

  private async pullStored(snapshotId: string, to: string): Promise<void> {
    const started = performance.now()
    const sha256 = await this.recorded(snapshotId)
    await (await this.links.agentOf(to)).pullSnapshot(snapshotId, { store: true, sha256 })
    this.log.info({ snapshotId, to, ms: Math.round(performance.now() - started) }, 'image pulled from the image store')
  }

  /** A URL `holder` serves `id` at, signed for a few minutes with its credential. */
  private signedUrl(holder: HostRow, kind: 'image' | 'rootfs', id: string): string {
    const expires = Date.now() + IMAGE_URL_VALID_MS
    const sig = imageSignature(hostCredential(this.secret, holder.id, holder.nonce), id, expires, kind)
    const url = new URL(`/v1/agent/${kind === 'image' ? 'images' : 'rootfs'}/${encodeURIComponent(id)}`, holder.url)
    url.searchParams.set('expires', String(expires))
    url.searchParams.set('sig', sig)
    return url.toString()
  }

  /**
   * Copies a built template's rootfs to host `to` from a host that has it: those that list the
   * template as ready first, then any other reachable one (a build a moment ago is in no
   * heartbeat yet). Pulled straight by `to` and checked there against the hash recorded for that
   * holder's copy (its build's, or the copy it pulled); a holder with no record is not asked while
   * any host has one. Never relayed.
   */
  async copyRootfs(missing: { rootfs: string; template: string }, to: string): Promise<void> {
    const started = performance.now()
    const lists = (r: HostRow) => (JSON.parse(r.capacity) as HostCapacity).templates.includes(missing.template)
    const copies = await this.hosts.rootfsCopies(missing.rootfs)
    if (copies.size === 0)
      this.log.warn(
        missing,
        'no hash was recorded for this template image: its copy is checked against its sender alone',
      )
    const holders = (await this.links.reachable())
      .filter((r) => r.id !== to && (copies.size === 0 || copies.has(r.id)))
      .sort((a, b) => Number(lists(b)) - Number(lists(a)))
      .slice(0, ROOTFS_HOLDERS_TRIED)
    const agent = await this.links.agentOf(to)
    let last: unknown = null
    for (const holder of holders) {
      const sha256 = copies.get(holder.id) ?? null
      try {
        await agent.pullRootfs(missing.rootfs, { url: this.signedUrl(holder, 'rootfs', missing.rootfs), sha256 })
        // `to` serves the same bytes from now on (the stream is made the same from the same tree)
        if (sha256) await this.hosts.placeRootfs(missing.rootfs, to, sha256)
        this.log.info(
          { ...missing, from: holder.id, to, ms: Math.round(performance.now() - started) },
          'template image pulled between hosts',
        )
        return
      } catch (err) {
        this.log.warn({ ...missing, from: holder.id, to, err: String(err) }, 'template image pull failed')
        last = err
      }
    }
    throw new AppError(
      'TEMPLATE_UNAVAILABLE',
      `template ${missing.template} was built on a host that is not reachable now, and no other host has its image${last ? ` (${String(last)})` : ''}`,
      missing,
    )
  }

  private async copyFromHolder(
    snapshotId: string,
    holder: HostRow | undefined,
    from: string,
    to: string,
  ): Promise<void> {
    const started = performance.now()
    const sha256 = await this.recorded(snapshotId)
    if (holder) {
      try {
        await (await this.links.agentOf(to)).pullSnapshot(snapshotId, {
          url: this.signedUrl(holder, 'image', snapshotId),
          sha256,
        })
        this.log.info(
          { snapshotId, from, to, ms: Math.round(performance.now() - started) },
          'image pulled between hosts',
        )
        return
      } catch (err) {
        this.log.warn({ snapshotId, from, to, err: String(err) }, 'direct image pull failed; relaying it')
      }
    }
    const image = await (await this.links.agentOf(from)).exportSnapshot(snapshotId)
    // the receiver checks the relayed bytes against the record, not the exporter's hash
    image.sha256.catch(() => {})
    const expected = sha256 ? Promise.resolve(sha256) : image.sha256
    await (await this.links.agentOf(to)).importSnapshot(snapshotId, chunksOf(image.stream), expected)
    this.log.info(
      { snapshotId, from, to, bytes: image.sizeBytes, ms: Math.round(performance.now() - started) },
      'image copied between hosts',
    )
  }

  /** Where an image leaving host `from` goes: the reachable, uncordoned host with the most free disk. */
  async imageTarget(from: string): Promise<string> {
    const best = (await this.links.reachable())
      .filter((r) => r.id !== from && r.state === 'ready')
      .map((r) => ({ id: r.id, free: (JSON.parse(r.capacity) as HostCapacity).diskFreeBytes }))
      .sort((a, b) => b.free - a.free)[0]
    if (!best) throw new AppError('NO_CAPACITY', 'no other host can take the image')
    return best.id
  }

  /** Moves a snapshot's image to another host: copied, placed there, removed from the first. */
  async moveImage(snapshotId: string, to: string): Promise<void> {
    const from = await this.hosts.hostOf(snapshotId)
    if (!from || from === to) return
    await this.copyImage(snapshotId, from, to)
    await this.hosts.place(snapshotId, 'snapshot', to, { vcpus: 0, memoryMB: 0 })
    await (await this.links.agentOf(from)).deleteSnapshot(snapshotId).catch(() => {})
  }

  /** Images being written to the shared store, by snapshot id (a delete waits for its write). */
  private readonly storing = new Map<string, Promise<void>>()

  /** Copies a new image to the shared store, if its host mounts one, after the call that made it answered. */
  storeInBackground(host: string, snapshotId: string): void {
    const write = (async () => {
      const row = (await this.links.rows()).find((r) => r.id === host)
      if (!row || !storeOf(row)) return
      const started = performance.now()
      if (await (await this.links.agentOf(host)).storeSnapshot(snapshotId))
        this.log.info(
          { snapshotId, host, ms: Math.round(performance.now() - started) },
          'image written to the image store',
        )
    })()
      .catch((err: unknown) =>
        this.log.warn({ snapshotId, host, err: String(err) }, 'writing an image to the image store failed'),
      )
      .finally(() => this.storing.delete(snapshotId))
    this.storing.set(snapshotId, write)
  }

  /** Removes the image from its holder and the shared store (once a write there in progress ended). */
  async deleteEverywhere(snapshotId: string, host: string): Promise<void> {
    await this.storing.get(snapshotId)
    try {
      await (await this.links.agentOf(host)).deleteSnapshot(snapshotId, { stored: true })
    } catch (err) {
      // its host is gone: the store's copy goes through another host that mounts it
      const holder = (await this.links.rows()).find((r) => r.id === host)
      const other = (await this.links.reachable()).find((r) => r.id !== host && holder && sameStore(r, holder))
      if (!other) throw err
      await this.links.remote(other).deleteSnapshot(snapshotId, { stored: true })
    }
  }
}
