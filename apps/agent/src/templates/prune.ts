// What a templates dir holds that nothing needs any more: rootfs dirs and snapshots of templates
// that were deleted or rebuilt (an older guest, other resources), guests of older versions, pulled
// images no template names; and the build layer cache down to a size.
import { readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import { diskUsage, type LayerStore, tempName } from './layers.ts'

/** A content-addressed artifact: `NAME-HASH` (a rootfs or a guest) or `NAME-HASH.snapshot-KEY`. */
const ARTIFACT = /^[a-z0-9][a-z0-9_.-]*-[0-9a-f]{16}(\.snapshot-[0-9a-f]{16})?$/
/** The `built-HASH` rootfs a template's artifact name carries. */
const BUILT_IN_NAME = /-(built-[0-9a-f]{16})(?:\.snapshot-[0-9a-f]{16})?$/
/** A pulled image's OCI layout in the pull cache. */
const LAYOUT = /^sha256-[0-9a-f]{64}$/

export interface PruneKeep {
  /** Artifact names in the templates dir something registered uses now. */
  names: Set<string>
  /** Name prefixes kept whole (a template whose image digest this process has not resolved yet). */
  prefixes: string[]
  /** Pull-cache layouts (`sha256-…`) registered templates use. */
  images: Set<string>
}

export interface PruneResult {
  /** What went, as paths relative to the templates dir. */
  removed: string[]
  freedBytes: number
}

/** Rootfs dirs live sandboxes run on (their bundle's config.json names it), as names in `templatesDir`. */
export function rootfsInUse(sandboxesDir: string, templatesDir: string): Set<string> {
  const out = new Set<string>()
  for (const dir of readdirSync(sandboxesDir)) {
    try {
      const config = JSON.parse(readFileSync(join(sandboxesDir, dir, 'config.json'), 'utf8')) as {
        root?: { path?: unknown }
      }
      const path = config.root?.path
      if (typeof path === 'string' && path.startsWith(`${templatesDir}/`)) out.add(basename(path))
    } catch {
      // a bundle being made or removed: its rootfs is a registered template's anyway
    }
  }
  return out
}

/** Removes `path` after renaming it aside (a reader sees it whole or gone); resolves with the bytes it took. */
async function removeAside(dir: string, name: string): Promise<number> {
  const path = join(dir, name)
  const bytes = await diskUsage(path)
  const doomed = join(dir, `.${tempName()}`)
  try {
    renameSync(path, doomed)
  } catch {
    return 0 // gone meanwhile
  }
  rmSync(doomed, { recursive: true, force: true })
  return bytes
}

/**
 * Removes what `keep` does not name: artifacts (rootfs dirs, snapshots, guests) and pulled images;
 * with `layerCacheBytes`, evicts least recently used build layers down to it. `buildsRunning`
 * leaves images and layers alone (a build may be about to read them).
 */
export async function pruneTemplatesDir(
  templatesDir: string,
  keep: PruneKeep,
  opts: { layers: LayerStore; layerCacheBytes?: number; buildsRunning: boolean },
): Promise<PruneResult> {
  const result: PruneResult = { removed: [], freedBytes: 0 }
  // a snapshot of a kept rootfs that is not named was baked by an older guest or with other limits
  const names = readdirSync(templatesDir).filter((n) => ARTIFACT.test(n))
  const kept = new Set(names.filter((n) => keep.names.has(n) || keep.prefixes.some((p) => n.startsWith(p))))
  // a kept snapshot of a built template (`NAME-built-HASH.snapshot-…`) keeps the rootfs it names
  for (const n of kept) {
    const built = BUILT_IN_NAME.exec(n)?.[1]
    if (built) kept.add(built)
  }
  for (const name of names) {
    if (kept.has(name)) continue
    result.freedBytes += await removeAside(templatesDir, name)
    result.removed.push(name)
  }
  if (opts.buildsRunning) return result
  const cache = join(templatesDir, '.oci')
  for (const name of safeList(cache)) {
    if (!LAYOUT.test(name) || keep.images.has(name)) continue
    result.freedBytes += await removeAside(cache, name)
    result.removed.push(`.oci/${name}`)
  }
  if (opts.layerCacheBytes !== undefined) {
    const evicted = await opts.layers.evict(opts.layerCacheBytes)
    result.removed.push(...evicted.removed.map((k) => `.layers/${k}`))
    result.freedBytes += evicted.freedBytes
  }
  return result
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}
