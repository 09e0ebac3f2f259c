// Puts the guest's files into the template store under a content-addressed dir, the one that is
// bind-mounted into sandboxes: a baked snapshot finds them at the same path whichever checkout
// runs the agent.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { GuestBundle } from './bundle.ts'
import { installGuestRuntime } from './runtime.ts'

export interface InstalledGuest {
  dir: string
  /** The guest's own Python, mounted at RUNTIME_MOUNT inside `dir` (which holds its mount point). */
  runtimeDir: string
  /** Of the files' names and contents and of the runtime: part of every baked snapshot's key. */
  hash: string
}

/**
 * Copies the bundle into `templatesDir/guest-<hash>`, once: written beside it and renamed, so a
 * half-written copy is never mounted. The guest's Python runtime is assembled from `hostPython`
 * beside it (also once).
 */
export function installGuest(templatesDir: string, bundle: GuestBundle, hostPython: string): InstalledGuest {
  const dir = join(templatesDir, `guest-${bundle.hash}`)
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`
    mkdirSync(tmp, { recursive: true })
    for (const f of bundle.files) {
      mkdirSync(dirname(join(tmp, f.name)), { recursive: true })
      writeFileSync(join(tmp, f.name), f.body, { mode: f.mode })
    }
    mkdirSync(join(tmp, 'runtime'))
    renameSync(tmp, dir)
  }
  const runtime = installGuestRuntime(templatesDir, hostPython)
  const hash = createHash('sha256').update(`${bundle.hash}\0${runtime.hash}`).digest('hex').slice(0, 16)
  return { dir, runtimeDir: runtime.dir, hash }
}
