// The build layer cache: each step's result is an overlayfs upper dir under `templatesDir/.layers/<key>`,
// stacked on its parent's; a step runs on a host overlay of the chain and its upper becomes the layer.
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { AppError } from '@forkbox/protocol'
import { processAlive } from '../runtime/process.ts'
import { openWriteArea, type WriteArea } from './build-disk.ts'

const run = promisify(execFile)

/** What `<key>/layer.json` records. */
interface LayerRecord {
  parent: string | null
  /** A base layer kept elsewhere (a built-in template's rootfs): used as it is, never copied. */
  external?: string
  /** The key whose build made it (counted and evicted as that key's); absent: the platform's own. */
  owner?: string
  /** Bytes its diff takes on disk, measured when it was made. */
  bytes?: number
}

/** How a layer is made: bounded while it is written, and whose it is. */
export interface LayerBound {
  /** Most bytes the step (or the unpack) may write; unset: unbounded (the platform's own builds of old). */
  maxBytes?: number
  owner?: string
  /** What the layer is, for an error's message (`RUN … (line 3)`). */
  what: string
}

/** The step's scratch space while it runs: the overlay's upper, work and merged dirs. */
export interface StepMount {
  /** The sandbox's root: the merged view of the chain with `upper` on top. */
  merged: string
  upper: string
  /** Whether the step's bounded scratch disk is full: a failure then is the bound's, not the step's. */
  full: () => boolean
}

/** The shim's file that keeps /tmp non-empty: runsc mounts a tmpfs over an empty /tmp, losing a RUN's writes there. */
export const TMP_KEEP = 'tmp/.forkbox-keep'
/** Where the build's read-only inputs (context, another stage's rootfs) are mounted in a build sandbox. */
export const BUILD_MOUNT_DIR = '/.forkbox-build'
/** Dirs a build sandbox mounts over; the shim provides them so runsc never creates them in a layer. */
const SHIM_DIRS = ['proc', 'dev', 'sys', 'opt/forkbox', `${BUILD_MOUNT_DIR.slice(1)}/src`]
/** Files a build sandbox mounts over (the operator's CA bundle). */
const SHIM_FILES = [`${BUILD_MOUNT_DIR.slice(1)}/ca-certificates.crt`]
/** The shim's name: a new one when what it holds changes (layers never depend on it). */
const SHIM = 'shim-2'
/** Most layers in one chain (a guard against a corrupt parent loop; the mount option's size limits first). */
export const MAX_CHAIN = 128
/** The kernel takes mount options up to a page: the lowerdir list must fit, paths relative to the store. */
const MAX_OPTIONS_CHARS = 4000
const TEMP_PREFIX = 'tmp-'

export function tempName(pid = process.pid): string {
  return `${TEMP_PREFIX}${pid}-${randomBytes(6).toString('hex')}`
}

/** The pid a temp dir name carries (null: not a temp dir). */
export function tempOwner(name: string): number | null {
  const m = /^tmp-(\d+)-[0-9a-f]+$/.exec(name)
  return m ? Number(m[1]) : null
}

/**
 * Which steps of a chain of keys must run: the prefix whose layers exist is reused, everything from
 * the first missing one on runs (a later layer can't be reused once its parent is rebuilt anew,
 * since its key chains the parent's).
 */
export function firstMissing(keys: readonly string[], has: (key: string) => boolean): number {
  const i = keys.findIndex((k) => !has(k))
  return i === -1 ? keys.length : i
}

/**
 * Mounts `lowers` (top first) at `target`: read-write with `rw`, else read-only. Paths under `cwd`
 * are given relative to it (mount runs there), so a chain of ~55 layers fits the option limit.
 */
export async function mountOverlay(
  target: string,
  lowers: string[],
  rw?: { upper: string; work: string },
  cwd = '/',
): Promise<void> {
  // one read-only lower is not an overlay: a bind of it is the same view
  if (!rw && lowers.length === 1) {
    await run('mount', ['--bind', '-o', 'ro', lowers[0] as string, target])
    await run('mount', ['-o', 'remount,bind,ro', target])
    return
  }
  const rel = (p: string) => (p.startsWith(`${cwd}/`) ? p.slice(cwd.length + 1) : p)
  const opts = [
    `lowerdir=${lowers.map(rel).join(':')}`,
    ...(rw ? [`upperdir=${rel(rw.upper)}`, `workdir=${rel(rw.work)}`] : []),
  ].join(',')
  if (opts.length > MAX_OPTIONS_CHARS)
    throw new AppError(
      'VALIDATION_FAILED',
      `a stage stacks ${lowers.length} layers, more than an overlay mount takes: merge some RUN steps`,
    )
  await run('mount', ['-t', 'overlay', 'overlay', '-o', opts, ...(rw ? [] : ['-r']), target], { cwd })
}

/** Unmounts `target`; a mount that stays busy (a process still in it) is detached lazily. */
export async function unmount(target: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    try {
      await run('umount', [target])
      return
    } catch (err) {
      if (!mountedAt(target)) return
      if (i === 19) {
        await run('umount', ['-l', target]).catch(() => {})
        throw err
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

/** Bytes a dir takes on disk (du: hardlinked files counted once). */
export async function diskUsage(path: string): Promise<number> {
  try {
    const { stdout } = await run('du', ['-s', '--block-size=1', path])
    return Number(stdout.split('\t')[0]) || 0
  } catch {
    return 0
  }
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch {
    return null
  }
}

function mountPoints(): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[1] ?? '').replace(/\\040/g, ' '))
}

function mountedAt(target: string): boolean {
  return mountPoints().includes(target)
}

/** Where a new layer's diff is written: on a scratch disk in its temp dir when bounded, else `tmp/diff` itself. */
function diffArea(tmp: string, bound: LayerBound): Promise<WriteArea> {
  return openWriteArea({ maxBytes: bound.maxBytes, parent: tmp, fallback: join(tmp, 'diff'), what: bound.what })
}

export class LayerStore {
  private readonly building = new Map<string, Promise<void>>()
  readonly root: string

  constructor(templatesDir: string) {
    this.root = join(templatesDir, '.layers')
    mkdirSync(this.root, { recursive: true })
  }

  has(key: string): boolean {
    return existsSync(join(this.root, key, 'layer.json'))
  }

  private record(key: string): LayerRecord {
    return JSON.parse(readFileSync(join(this.root, key, 'layer.json'), 'utf8')) as LayerRecord
  }

  /** The layer's dirs, top first: what overlayfs takes as lowerdirs. */
  chain(key: string): string[] {
    const out: string[] = []
    for (let k: string | null = key; k !== null; ) {
      const rec = this.record(k)
      out.push(rec.external ?? join(this.root, k, 'diff'))
      k = rec.parent
      if (out.length > MAX_CHAIN) throw new Error(`layer ${key}: chain longer than ${MAX_CHAIN}`)
    }
    return out
  }

  /** Records a base layer that lives elsewhere (a built-in template's rootfs). */
  addExternal(key: string, dir: string): void {
    if (this.has(key)) return
    const tmp = join(this.root, tempName())
    mkdirSync(tmp)
    writeFileSync(join(tmp, 'layer.json'), JSON.stringify({ parent: null, external: dir } satisfies LayerRecord))
    this.commit(tmp, key)
  }

  /**
   * Makes base layer `key` by filling a fresh `diff` dir (an unpacked image, an empty scratch);
   * once. With a bound, `fill` writes on a scratch disk of that size (`full` tells when it filled
   * it) and the result is copied into the store.
   */
  makeBase(
    key: string,
    fill: (diff: string, full: () => boolean) => Promise<void>,
    bound: LayerBound = { what: key },
  ): Promise<void> {
    return this.once(key, async () => {
      const tmp = join(this.root, tempName())
      let area: WriteArea | null = null
      try {
        mkdirSync(tmp)
        area = await diffArea(tmp, bound)
        await fill(area.dir, area.full)
        mkdirSync(area.dir, { recursive: true })
        await area.keep()
        await this.writeRecordMeasured(tmp, { parent: null, ...(bound.owner ? { owner: bound.owner } : {}) })
        this.commit(tmp, key)
      } finally {
        await area?.release()
        rmSync(tmp, { recursive: true, force: true })
      }
    })
  }

  /** Writes a new layer's record with the bytes its diff takes. */
  private async writeRecordMeasured(tmp: string, rec: LayerRecord): Promise<void> {
    this.writeRecord(tmp, { ...rec, bytes: await diskUsage(join(tmp, 'diff')) })
  }

  private writeRecord(tmp: string, rec: LayerRecord): void {
    writeFileSync(join(tmp, 'layer.json'), JSON.stringify(rec))
  }

  /** Bytes a layer's diff takes (0 for an external one or one gone meanwhile). */
  bytesOf(key: string): number {
    try {
      return this.record(key).bytes ?? 0
    } catch {
      return 0
    }
  }

  /**
   * Makes layer `key` on `parent`: `step` runs with the chain mounted as an overlay whose upper is
   * a fresh dir; when it succeeds the upper becomes the layer (renamed: never half there), when it
   * fails or throws everything it made goes. A key another build is making is waited on.
   */
  makeStep(
    key: string,
    parent: string,
    step: (mount: StepMount) => Promise<void>,
    bound: LayerBound = { what: key },
  ): Promise<void> {
    return this.once(key, async () => {
      const tmp = join(this.root, tempName())
      let area: WriteArea | null = null
      let mounted = false
      const merged = join(tmp, 'merged')
      try {
        mkdirSync(tmp)
        // the upper on the bounded disk, and overlayfs's work dir beside it (it must share its filesystem)
        area = await diffArea(tmp, bound)
        const work = join(dirname(area.dir), 'work')
        const mount: StepMount = { merged, upper: area.dir, full: area.full }
        for (const d of [merged, mount.upper, work]) mkdirSync(d, { recursive: true })
        await mountOverlay(merged, [this.shim(), ...this.chain(parent)], { upper: mount.upper, work }, this.root)
        mounted = true
        await step(mount)
        await unmount(merged)
        mounted = false
        this.pruneShim(mount.upper)
        await area.keep()
        // unbounded, overlayfs's work dir is beside the layer's diff (bounded, it went with the disk)
        rmSync(work, { recursive: true, force: true })
        rmSync(merged, { recursive: true, force: true })
        await this.writeRecordMeasured(tmp, { parent, ...(bound.owner ? { owner: bound.owner } : {}) })
        this.commit(tmp, key)
      } finally {
        if (mounted) await unmount(merged).catch(() => {})
        await area?.release()
        rmSync(tmp, { recursive: true, force: true })
      }
    })
  }

  /** Mounts the chain of `key` read-only at a fresh dir (another stage's rootfs for `COPY --from`). */
  async mountReadOnly(key: string): Promise<{ dir: string; release: () => Promise<void> }> {
    const tmp = join(this.root, tempName())
    const dir = join(tmp, 'merged')
    mkdirSync(dir, { recursive: true })
    try {
      await mountOverlay(dir, this.chain(key), undefined, this.root)
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true })
      throw err
    }
    return {
      dir,
      release: async () => {
        await unmount(dir)
        rmSync(tmp, { recursive: true, force: true })
      },
    }
  }

  /**
   * Makes `key` unless it exists; a key another build is making is waited on, and made here after
   * all if that build fails or is aborted (this build still needs it).
   */
  private async once(key: string, make: () => Promise<void>): Promise<void> {
    for (;;) {
      if (this.has(key)) return
      const running = this.building.get(key)
      if (!running) {
        const p = make().finally(() => this.building.delete(key))
        this.building.set(key, p)
        return p
      }
      await running.catch(() => {})
    }
  }

  private commit(tmp: string, key: string): void {
    try {
      renameSync(tmp, join(this.root, key))
    } catch (err) {
      // another agent on this templates dir made it first: theirs is as good
      if (!this.has(key)) throw err
    }
  }

  /**
   * The top lower of every step: the mount points a build sandbox needs (so runsc does not create
   * them in the step's layer) and a file that keeps /tmp from being hidden under runsc's tmpfs.
   */
  private shim(): string {
    const dir = join(this.root, SHIM)
    if (!existsSync(dir)) {
      const tmp = join(this.root, tempName())
      try {
        for (const d of SHIM_DIRS) mkdirSync(join(tmp, d), { recursive: true, mode: 0o755 })
        for (const f of SHIM_FILES) writeFileSync(join(tmp, f), '', { mode: 0o644 })
        mkdirSync(join(tmp, 'tmp'))
        chmodSync(join(tmp, 'tmp'), 0o1777)
        writeFileSync(join(tmp, TMP_KEEP), '')
        this.commit(tmp, SHIM)
      } finally {
        rmSync(tmp, { recursive: true, force: true })
      }
    }
    return dir
  }

  /**
   * What the build sandbox itself left in a step's upper: a whiteout (or a changed copy) of the
   * shim's /tmp file, and the resolv.conf the guest writes at start (as in Docker, a RUN's
   * resolv.conf is the platform's and never part of the image).
   */
  private pruneShim(upper: string): void {
    for (const [dir, file] of [
      ['tmp', TMP_KEEP],
      ['etc', 'etc/resolv.conf'],
    ] as const) {
      // lstat first: a step may have made the dir a symlink, which must not be followed on the host
      if (!lstatOrNull(join(upper, dir))?.isDirectory()) continue
      const st = lstatOrNull(join(upper, file))
      if (st && !st.isDirectory()) rmSync(join(upper, file), { force: true })
    }
  }

  /** Marks `key` used now: eviction takes the least recently used first. */
  touch(key: string): void {
    const now = new Date()
    try {
      utimesSync(join(this.root, key, 'layer.json'), now, now)
    } catch {
      // gone meanwhile (evicted by another agent): the next build makes it again
    }
  }

  /**
   * Evicts least recently used layers until the store holds at most `maxBytes`: only leaves (no
   * layer names them as parent), so no chain breaks, and never one a build is making or a mount
   * (this agent's or another's on the same dir) reads. With `owner`, only that key's layers are
   * counted and evicted (a key's cache is bounded by its own quota, not by others' builds).
   * Resolves with the keys removed and bytes freed.
   */
  async evict(maxBytes: number, owner?: string): Promise<{ removed: string[]; freedBytes: number }> {
    const entries = new Map<string, { parent: string | null; used: number; bytes: number; owned: boolean }>()
    for (const key of readdirSync(this.root)) {
      if (tempOwner(key) !== null || key.startsWith('shim-') || !this.has(key)) continue
      let rec: LayerRecord
      try {
        rec = this.record(key)
      } catch {
        continue // removed meanwhile by another agent on this dir
      }
      const st = statSync(join(this.root, key, 'layer.json'))
      entries.set(key, {
        parent: rec.parent,
        used: st.mtimeMs,
        bytes: rec.external ? 0 : (rec.bytes ?? (await diskUsage(join(this.root, key)))),
        owned: owner === undefined || rec.owner === owner,
      })
    }
    let total = [...entries.values()].filter((e) => e.owned).reduce((n, e) => n + e.bytes, 0)
    const mounts = readFileSync('/proc/mounts', 'utf8')
    const busy = (key: string) =>
      this.building.has(key) || mounts.includes(`${key}/diff`) || mounts.includes(`${this.root}/${key}`)
    const removed: string[] = []
    let freedBytes = 0
    while (total > maxBytes) {
      const parents = new Set([...entries.values()].map((e) => e.parent))
      const leaves = [...entries]
        .filter(([k, e]) => e.owned && !parents.has(k) && !busy(k))
        .sort((a, b) => a[1].used - b[1].used)
      const next = leaves[0]
      if (!next) break
      const [key, e] = next
      // renamed first: a build looking at it now sees it gone, never half there
      const doomed = join(this.root, tempName())
      try {
        renameSync(join(this.root, key), doomed)
      } catch {
        entries.delete(key)
        continue
      }
      rmSync(doomed, { recursive: true, force: true })
      entries.delete(key)
      total -= e.bytes
      freedBytes += e.bytes
      removed.push(key)
    }
    return { removed, freedBytes }
  }

  /**
   * After a restart: what a build of a dead agent left (its step mounts and temp dirs) goes. Temp
   * dirs of a live process (another agent sharing the templates dir) are left alone.
   */
  async reconcile(): Promise<string[]> {
    const removed: string[] = []
    const stale = (name: string) => {
      const pid = tempOwner(name)
      return pid !== null && (pid === process.pid ? !this.building.size : !processAlive(pid))
    }
    for (const m of mountPoints()) {
      if (!m.startsWith(`${this.root}/`)) continue
      const name = m.slice(this.root.length + 1).split('/')[0] ?? ''
      if (!stale(name)) continue
      await run('umount', ['-l', m]).catch(() => {})
      removed.push(m)
    }
    for (const name of readdirSync(this.root)) {
      if (!stale(name)) continue
      rmSync(join(this.root, name), { recursive: true, force: true })
      removed.push(join(this.root, name))
    }
    return removed
  }
}
