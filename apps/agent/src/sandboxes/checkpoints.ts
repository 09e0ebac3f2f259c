// Checkpoints: a running sandbox's memory, processes and disk written to an image (a user
// snapshot, a fork's source, a hibernate, a template bake) and sandboxes restored from them.
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync, statfsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { AppError, type ForkOptions, type ForkOutcome, type StartSandboxSpec } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { processAlive } from '../runtime/process.ts'
import type { TemplateBaker } from '../templates/baker.ts'
import { checkpointTo } from './checkpoint-image.ts'
import type { Containers } from './containers.ts'
import { type ExpectedDigest, type ExportedImage, exportImage, importImage } from './image-transfer.ts'

/** A fork's transient snapshot id starts so. */
const FORK_PREFIX = 'fork-'
const TMPFS_MAGIC = 0x01021994
/** A fork's image is written then read at once: a tmpfs with less room than this is not used. */
const FORK_SCRATCH_MIN_FREE = 2 * 1024 ** 3

/**
 * Where forks' images go (written, restored from at once, deleted): a directory of this data
 * dir's own on /dev/shm when that is a tmpfs with room, so a fork never waits on disk writeback
 * (its p99 halved: docs/benchmarks.md); else `fallback`. Ours only: made 0700, and refused when
 * it is a link or someone else's (a world-writable /dev/shm lets anyone make the name first).
 */
export function forkScratchDir(dataDir: string, fallback: string): string {
  try {
    const fs = statfsSync('/dev/shm')
    if (fs.type !== TMPFS_MAGIC || fs.bavail * fs.bsize < FORK_SCRATCH_MIN_FREE) return fallback
    const dir = join('/dev/shm', `forkbox-forks-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`)
    if (!existsSync(dir)) mkdirSync(dir, { mode: 0o700 })
    const st = lstatSync(dir)
    if (!st.isDirectory() || st.uid !== process.getuid?.() || (st.mode & 0o077) !== 0) return fallback
    return dir
  } catch {
    return fallback
  }
}

/** The user's snapshots (also forks' sources and hibernated sandboxes' images) and restores from them. */
export class Checkpoints {
  /** Forks' transient images (`fork-…`): on tmpfs when the host has one. */
  private readonly forkDir: string

  constructor(
    private readonly config: AgentConfig,
    private readonly containers: Containers,
    private readonly baker: TemplateBaker,
  ) {
    this.forkDir = forkScratchDir(config.dataDir, this.snapshotsDir)
  }

  private get snapshotsDir(): string {
    return join(this.config.dataDir, 'snapshots')
  }

  private image(snapshotId: string): string {
    if (!/^[A-Za-z0-9_-]+$/.test(snapshotId)) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${snapshotId}`)
    return join(snapshotId.startsWith(FORK_PREFIX) ? this.forkDir : this.snapshotsDir, snapshotId)
  }

  /** At close: the forks' scratch dir goes (a fork under way is cut short by the close anyway). */
  close(): void {
    if (this.forkDir !== this.snapshotsDir) rmSync(this.forkDir, { recursive: true, force: true })
  }

  snapshot(id: string, snapshotId: string): Promise<{ sizeBytes: number }> {
    // the sandbox pauses while its image is written, then carries on (stop-then-restore in runsc)
    return checkpointTo(this.containers.runsc, this.containers.live(id), this.image(snapshotId), true)
  }

  /** Starts `spec` from its snapshot: memory, processes and disk as they were, `spec.envs` on top. */
  async restore(spec: StartSandboxSpec & { snapshot: string }, signal?: AbortSignal): Promise<void> {
    const def = this.baker.definition(spec.template)
    await this.baker.ensureTemplate(spec.template)
    const image = this.image(spec.snapshot)
    if (!existsSync(image)) throw new AppError('SNAPSHOT_NOT_FOUND', `no snapshot ${spec.snapshot} on this host`)
    await this.containers.boot(
      { ...spec, rootfs: this.baker.rootfsOf(def), kernel: def.kernel, image, userSnapshot: true },
      signal,
    )
  }

  async fork(
    sourceId: string,
    children: Omit<StartSandboxSpec, 'snapshot'>[],
    opts: ForkOptions = {},
  ): Promise<ForkOutcome[]> {
    const snapshotId = `${FORK_PREFIX}${randomBytes(10).toString('hex')}`
    await this.snapshot(sourceId, snapshotId)
    try {
      await opts.onCheckpointed?.()
      // restores in parallel: each one's fixed start-up (~0.3 s of runsc process start) overlaps
      return await Promise.all(
        children.map((child) =>
          this.restore({ ...child, snapshot: snapshotId }, opts.signal).then(
            (): ForkOutcome => ({ id: child.id, error: null }),
            (err: unknown): ForkOutcome => ({
              id: child.id,
              error: err instanceof Error ? err : new AppError('INTERNAL', String(err)),
            }),
          ),
        ),
      )
    } finally {
      await this.deleteSnapshot(snapshotId)
    }
  }

  /** The snapshot's image as one stream, to copy it to another host (less its first `skip` bytes: a resumed copy). */
  exportSnapshot(snapshotId: string, skip = 0): ExportedImage {
    return exportImage(this.image(snapshotId), skip)
  }

  /** A snapshot copied from another host; known once its bytes match the hash `expected` says. */
  async importSnapshot(snapshotId: string, body: AsyncIterable<Uint8Array>, expected: ExpectedDigest): Promise<void> {
    const image = this.image(snapshotId)
    mkdirSync(dirname(image), { recursive: true })
    await importImage(image, body, expected)
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    rmSync(this.image(snapshotId), { recursive: true, force: true })
  }

  /** Removes every stored snapshot not in `keep`, and half-written ones of processes that are gone. */
  async pruneSnapshots(keep: string[]): Promise<void> {
    const wanted = new Set(keep)
    for (const dir of new Set([this.snapshotsDir, this.forkDir])) {
      mkdirSync(dir, { recursive: true })
      for (const name of readdirSync(dir)) {
        const owner = /\.tmp-(\d+)$/.exec(name)?.[1]
        if (owner ? !processAlive(Number(owner)) : !wanted.has(name))
          rmSync(join(dir, name), { recursive: true, force: true })
      }
    }
  }
}
