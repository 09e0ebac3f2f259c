// Puts the guest's files into the template store under a content-addressed dir, the one that is
// bind-mounted into sandboxes: a baked snapshot finds them at the same path whichever checkout
// runs the agent.
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { GuestBundle } from './bundle.ts'

export interface InstalledGuest {
  dir: string
  /** Of the files' names and contents: part of every baked snapshot's key. */
  hash: string
}

/**
 * Copies the bundle into `templatesDir/guest-<hash>`, once: written beside it and renamed, so a
 * half-written copy is never mounted.
 */
export function installGuest(templatesDir: string, bundle: GuestBundle): InstalledGuest {
  const dir = join(templatesDir, `guest-${bundle.hash}`)
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`
    mkdirSync(tmp, { recursive: true })
    for (const f of bundle.files) {
      mkdirSync(dirname(join(tmp, f.name)), { recursive: true })
      writeFileSync(join(tmp, f.name), f.body, { mode: 0o644 })
    }
    renameSync(tmp, dir)
  }
  return { dir, hash: bundle.hash }
}
