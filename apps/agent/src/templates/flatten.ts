// A template rootfs from a layer chain as one plain dir: the chain's merged view (overlayfs applies
// whiteouts and opaque dirs) rebuilt as a farm of hardlinks into the layers, so it costs inodes, not bytes.
import {
  chmodSync,
  copyFileSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  type Stats,
  symlinkSync,
  utimesSync,
} from 'node:fs'
import { join } from 'node:path'

/** What a path is in a layer, seen without following a symlink; null when absent. */
export type EntryKind = 'dir' | 'whiteout' | 'other' | null
export type KindOf = (path: string) => EntryKind

function kindOf(path: string): EntryKind {
  let st: Stats
  try {
    st = lstatSync(path)
  } catch {
    return null
  }
  if (st.isDirectory()) return 'dir'
  return st.isCharacterDevice() && st.rdev === 0 ? 'whiteout' : 'other'
}

/** `kind` remembering directories (every file under one asks about it again, in every layer). */
function memoDirs(kind: KindOf): KindOf {
  const seen = new Map<string, EntryKind>()
  return (path) => {
    let k = seen.get(path)
    if (k === undefined) {
      k = kind(path)
      if (k === 'dir' || k === null) seen.set(path, k)
    }
    return k
  }
}

/**
 * The layer (index into `layers`, top first) whose own entry `rel` is, or null. Every directory on
 * the way must be a real directory in that layer: a symlink there is never followed, since on the
 * host it would lead out of the layer. A whiteout, or a non-directory on the way, hides the lower
 * layers, so the search stops there.
 */
export function providerOf(rel: string, layers: readonly string[], kind: KindOf = kindOf): number | null {
  const parts = rel.split('/').filter(Boolean)
  for (const [i, layer] of layers.entries()) {
    let at = layer
    let absent = false
    for (const [j, part] of parts.entries()) {
      at = `${at}/${part}`
      const k = kind(at)
      if (k === null) {
        absent = true
        break
      }
      if (k === 'whiteout') return null
      if (j === parts.length - 1) return i
      if (k !== 'dir') return null
    }
    if (!absent && parts.length === 0) return i
  }
  return null
}

export interface FlattenStats {
  dirs: number
  linked: number
  copied: number
  skipped: number
}

/**
 * Rebuilds `merged` (a mounted view of `layers`) at `target`, made at `tmp` (same filesystem) and
 * renamed: dirs are made with their owners, modes and times; everything else is a hardlink to the
 * layer that provides it (a copy when the layer is on another filesystem).
 */
export async function flatten(
  merged: string,
  layers: readonly string[],
  target: string,
  tmp: string,
): Promise<FlattenStats> {
  const stats: FlattenStats = { dirs: 0, linked: 0, copied: 0, skipped: 0 }
  const dirs: { path: string; st: Stats }[] = []
  const kind = memoDirs(kindOf)
  try {
    const walk = async (rel: string) => {
      // tens of thousands of sync calls: let the agent's other work run between dirs
      await new Promise((r) => setImmediate(r))
      const st = lstatSync(join(merged, rel))
      mkdirSync(join(tmp, rel), { recursive: rel === '' })
      dirs.push({ path: join(tmp, rel), st })
      stats.dirs += 1
      for (const name of readdirSync(join(merged, rel))) {
        const child = rel ? `${rel}/${name}` : name
        const cst = lstatSync(join(merged, child))
        if (cst.isDirectory()) await walk(child)
        else place(child, cst)
      }
    }
    const place = (rel: string, st: Stats) => {
      const i = providerOf(rel, layers, kind)
      if (i === null) {
        stats.skipped += 1
        return
      }
      const src = join(layers[i] as string, rel)
      const dst = join(tmp, rel)
      try {
        linkSync(src, dst)
        stats.linked += 1
        return
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err
      }
      if (st.isSymbolicLink()) symlinkSync(readlinkSync(src), dst)
      else if (st.isFile()) copyFileSync(src, dst)
      else {
        stats.skipped += 1
        return
      }
      lchownSync(dst, st.uid, st.gid)
      if (st.isFile()) {
        chmodSync(dst, st.mode & 0o7777)
        utimesSync(dst, st.atime, st.mtime)
      }
      stats.copied += 1
    }
    await walk('')
    // deepest first: setting a dir's times before its children are made would not stick
    for (const d of dirs.reverse()) {
      lchownSync(d.path, d.st.uid, d.st.gid)
      chmodSync(d.path, d.st.mode & 0o7777)
      utimesSync(d.path, d.st.atime, d.st.mtime)
    }
    renameSync(tmp, target)
    return stats
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true })
    throw err
  }
}
