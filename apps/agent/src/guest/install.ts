// Puts the guest's files into the template store under a content-addressed dir, the one that is
// bind-mounted into sandboxes: a baked snapshot finds them at the same path whichever checkout
// runs the agent.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'

export interface InstalledGuest {
  dir: string
  /** Of the files' names and contents: part of every baked snapshot's key. */
  hash: string
}

/**
 * Copies `files` (paths kept relative to `root`) into `templatesDir/guest-<hash>`, once: written
 * beside it and renamed, so a half-written copy is never mounted.
 */
export function installGuest(templatesDir: string, root: string, files: string[]): InstalledGuest {
  const entries = files.map((f) => ({ name: relative(root, f), body: readFileSync(f) }))
  const hash = createHash('sha256')
  for (const f of entries) hash.update(f.name).update(f.body)
  const digest = hash.digest('hex').slice(0, 16)
  const dir = join(templatesDir, `guest-${digest}`)
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`
    mkdirSync(tmp, { recursive: true })
    for (const f of entries) {
      mkdirSync(dirname(join(tmp, f.name)), { recursive: true })
      writeFileSync(join(tmp, f.name), f.body, { mode: 0o644 })
    }
    renameSync(tmp, dir)
  }
  return { dir, hash: digest }
}
