// The build context as a build sees it: its entries after `.dockerignore`, and a content hash per
// COPY/ADD source (what keys the step's layer).
import { createHash } from 'node:crypto'
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { join } from 'node:path'
import type { BuildPlan } from './dockerfile-plan.ts'
import { filterContext } from './dockerignore.ts'

export interface ContextEntry {
  /** Relative to the context root, `/`-separated. */
  path: string
  kind: 'file' | 'dir' | 'link'
  mode: number
}

/** Every entry under `dir` (never following a symlink), sorted, minus what `.dockerignore` excludes. */
export function listContext(dir: string): ContextEntry[] {
  const all: ContextEntry[] = []
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name
      const st = lstatSync(join(dir, path))
      const kind = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : st.isFile() ? 'file' : null
      if (!kind) continue
      all.push({ path, kind, mode: st.mode & 0o7777 })
      if (kind === 'dir') walk(path)
    }
  }
  walk('')
  const ignore = join(dir, '.dockerignore')
  const text = existsSync(ignore) && lstatSync(ignore).isFile() ? readFileSync(ignore, 'utf8') : undefined
  const kept = new Set(
    filterContext(
      all.map((e) => e.path),
      text,
    ),
  )
  return all.filter((e) => kept.has(e.path))
}

function globRegExp(pattern: string): RegExp {
  const body = pattern
    .split('')
    .map((c) => (c === '*' ? '[^/]*' : c === '?' ? '[^/]' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
    .join('')
  return new RegExp(`^${body}(/.*)?$`)
}

/** The entries a COPY source (a path or a `*`/`?` pattern) takes, its own and everything under it. */
export function sourceEntries(entries: readonly ContextEntry[], source: string): ContextEntry[] {
  if (source === '.' || source === '') return [...entries]
  const re = globRegExp(source.replace(/\/+$/, ''))
  return entries.filter((e) => re.test(e.path))
}

/** A hash of what the source takes: names, kinds, modes and contents (link targets for links). */
export function hashSource(dir: string, entries: readonly ContextEntry[], source: string): string {
  const h = createHash('sha256')
  for (const e of sourceEntries(entries, source)) {
    h.update(`${e.path}\0${e.kind}\0${e.mode}\0`)
    if (e.kind === 'file')
      h.update(
        createHash('sha256')
          .update(readFileSync(join(dir, e.path)))
          .digest(),
      )
    else if (e.kind === 'link') h.update(readlinkSync(join(dir, e.path)))
    h.update('\0')
  }
  return h.digest('hex')
}

/** The content hash of every context source the plan's COPY/ADD steps name, by source. */
export function contextHashes(dir: string, entries: readonly ContextEntry[], plan: BuildPlan): Map<string, string> {
  const out = new Map<string, string>()
  for (const stage of plan.stages)
    for (const step of stage.steps)
      if (step.op === 'copy' && !step.from)
        for (const s of step.sources) if (!out.has(s)) out.set(s, hashSource(dir, entries, s))
  return out
}
