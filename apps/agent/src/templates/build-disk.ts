// A size-bounded scratch filesystem for what a build writes while it writes it: a sparse ext4
// image, loop-mounted, that a step's overlay upper (or an image unpack) lives on. A write past the
// bound gets ENOSPC inside the build, and the host's disk moves by at most the image's size.
import { execFile } from 'node:child_process'
import { mkdirSync, rmSync, statfsSync } from 'node:fs'
import { basename, join } from 'node:path'
import { promisify } from 'node:util'
import { AppError } from '@forkbox/protocol'

const run = promisify(execFile)

/** The smallest scratch disk made: ext4's own metadata needs a few MiB. */
export const MIN_SCRATCH_BYTES = 16 * 1024 * 1024
/** What the host keeps free whatever a build is allowed: the database, snapshots and sandboxes live there too. */
export const HOST_RESERVE_BYTES = 1024 * 1024 * 1024
/** A scratch disk with less than this left (or no inode) counts as full. */
const FULL_BYTES = 2 * 1024 * 1024

/** Bytes the filesystem holding `path` has free for an unprivileged writer. */
export function freeBytesOf(path: string): number {
  const s = statfsSync(path)
  return s.bavail * s.bsize
}

export class ScratchDisk {
  private constructor(
    /** The mounted filesystem's root. */
    readonly dir: string,
    private readonly image: string,
    /** The size asked for (the bound). */
    readonly bytes: number,
  ) {}

  /**
   * Makes a scratch disk of `bytes` under `parent` (a dir of the caller's that its crash recovery
   * removes): `parent/scratch.img` mounted at `parent/scratch`. Refused with NO_SPACE when the host
   * has less than the bound plus its reserve free: the bound must be real, not the host's.
   */
  static async make(parent: string, bytes: number, what: string): Promise<ScratchDisk> {
    const room = freeBytesOf(parent) - HOST_RESERVE_BYTES
    const size = Math.max(MIN_SCRATCH_BYTES, Math.floor(bytes / 4096) * 4096)
    if (size > room)
      throw new AppError(
        'NO_SPACE',
        `${what}: the host has ${mib(Math.max(0, room))} MiB free for builds, less than the ${mib(size)} MiB it may write`,
        { neededBytes: size, freeBytes: Math.max(0, room) },
      )
    const image = join(parent, 'scratch.img')
    const dir = join(parent, 'scratch')
    mkdirSync(dir, { recursive: true })
    try {
      await run('truncate', ['-s', String(size), image])
      // no journal, nothing reserved for root, an inode per 8 KiB (package installs are many small files)
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-i', '8192', '-O', '^has_journal', '-E', 'nodiscard', image])
      await run('mount', ['-o', 'loop,noatime', image, dir])
    } catch (err) {
      rmSync(image, { force: true })
      throw new AppError('INTERNAL', `making the build's scratch disk failed: ${String(err)}`)
    }
    return new ScratchDisk(dir, image, size)
  }

  /** Whether a write could have failed for want of space (bytes or inodes). */
  full(): boolean {
    const s = statfsSync(this.dir)
    return s.bavail * s.bsize < FULL_BYTES || s.ffree === 0
  }

  /** Unmounts it (lazily if something still holds it) and removes its image. */
  async release(): Promise<void> {
    await run('umount', [this.dir]).catch(() => run('umount', ['-l', this.dir]).catch(() => {}))
    rmSync(this.image, { force: true })
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Where one piece of a build writes: held to its bound while it is written, or not at all. */
export interface WriteArea {
  /** The dir to write into (made by the writer). */
  readonly dir: string
  /** Whether a write could have failed for want of space: then a failure is the bound's (never, unbounded). */
  full(): boolean
  /** Puts what was written at the area's `fallback`: copied off the scratch disk, which is then released. */
  keep(): Promise<void>
  /** Takes the scratch disk down (and `parent`, when it was made for it); again, or after `keep`, does nothing. */
  release(): Promise<void>
}

export interface WriteAreaOptions {
  /** Most bytes written; none: unbounded, and the area is `fallback` itself. */
  maxBytes: number | undefined
  /** Where the scratch disk is made: a dir its owner's crash recovery removes; made here (and removed on release) when missing. */
  parent: string
  /** Where what is written ends up; bounded, it is first written to a dir of its name on the scratch disk. */
  fallback: string
  /** What writes, for the NO_SPACE that refuses a bound the host cannot give. */
  what: string
}

/** A dir to write into bounded by a scratch disk of `maxBytes`, or with no bound `fallback` itself. */
export async function openWriteArea(opts: WriteAreaOptions): Promise<WriteArea> {
  const { maxBytes, parent, fallback, what } = opts
  if (maxBytes === undefined) return { dir: fallback, full: () => false, keep: async () => {}, release: async () => {} }
  const madeParent = mkdirSync(parent, { recursive: true }) !== undefined
  const dropParent = () => {
    if (madeParent) rmSync(parent, { recursive: true, force: true })
  }
  let disk: ScratchDisk | null
  try {
    disk = await ScratchDisk.make(parent, maxBytes, what)
  } catch (err) {
    dropParent()
    throw err
  }
  const dir = join(disk.dir, basename(fallback))
  const release = async () => {
    if (!disk) return
    const d = disk
    disk = null
    await d.release()
    dropParent()
  }
  return {
    dir,
    full: () => disk?.full() ?? false,
    keep: async () => {
      await copyTree(dir, fallback)
      await release()
    },
    release,
  }
}

/** Copies a tree with owners, modes, times, links, device nodes (overlay whiteouts) and xattrs. */
export async function copyTree(from: string, to: string): Promise<void> {
  await run('cp', ['-a', '--', from, to], { maxBuffer: 1024 * 1024 })
}

export function mib(bytes: number): number {
  return Math.round(bytes / 2 ** 20)
}

/** A bound on what one piece of a build writes, and what set it (for the error that names it). */
export interface ByteBound {
  maxBytes: number
  /** `quota`: the key's templateBytes quota; `disk`: the template's diskMB; `image`: the host's cap on one image. */
  by: 'quota' | 'disk' | 'image'
}

/** What a key's templateBytes quota leaves as a bound (undefined: the key has no quota). */
export function quotaBound(maxBytes: number | undefined): ByteBound | undefined {
  return maxBytes === undefined ? undefined : { maxBytes, by: 'quota' }
}

/** The smaller of two bounds (undefined: none). */
export function tighter(a: ByteBound | undefined, b: ByteBound | undefined): ByteBound | undefined {
  if (!a) return b
  if (!b) return a
  return b.maxBytes < a.maxBytes ? b : a
}

/** The failure of `what` that wrote past `bound`: QUOTA_EXCEEDED for the key's quota, else NO_SPACE. */
export function boundError(what: string, bound: ByteBound, details: Record<string, unknown> = {}): AppError {
  const limit = `${mib(bound.maxBytes)} MiB`
  const d = { ...details, limitBytes: bound.maxBytes, bound: bound.by }
  if (bound.by === 'quota')
    return new AppError('QUOTA_EXCEEDED', `${what} wrote past what this key's templateBytes quota leaves (${limit})`, {
      ...d,
      quota: 'templateBytes',
    })
  if (bound.by === 'disk')
    return new AppError('NO_SPACE', `${what} wrote past the template's disk (diskMB: ${limit})`, d)
  return new AppError(
    'NO_SPACE',
    `${what} is larger than this host takes of one image (${limit}, FORKBOX_MAX_IMAGE_MB)`,
    d,
  )
}
