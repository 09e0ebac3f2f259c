// The guest as installed into sandboxes: the guest package's files and the code kernels, hashed.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** The guest package, as a directory beside the kernels in the bundle. */
export const GUEST_PACKAGE = 'forkbox_guest'
/** The code kernels, copied beside the guest package. */
const KERNEL_FILES = ['forkbox_kernel.py', 'forkbox_charts.py', 'forkbox_kernel.cjs']
/** Programs users run in sandboxes (sudo: the templates link /usr/bin/sudo to it), installed executable. */
const PROGRAM_FILES = ['forkbox_sudo.py']

export interface GuestBundle {
  /** Paths relative to the bundle dir (the guest dir in sandboxes); `/` separated. */
  files: { name: string; body: Buffer; mode: number }[]
  /** Of every file's name and content: names the installed copy and keys baked snapshots. */
  hash: string
}

/** Reads the guest from `guestDir` (apps/guest): every `.py` of the package, the kernels and the programs. */
export function readGuestBundle(guestDir: string): GuestBundle {
  const pkg = readdirSync(join(guestDir, GUEST_PACKAGE))
    .filter((f) => f.endsWith('.py'))
    .sort()
    .map((f) => `${GUEST_PACKAGE}/${f}`)
  const files = [...pkg, ...KERNEL_FILES, ...PROGRAM_FILES].map((name) => ({
    name,
    body: readFileSync(join(guestDir, name)),
    mode: PROGRAM_FILES.includes(name) ? 0o755 : 0o644,
  }))
  const hash = createHash('sha256')
  for (const f of files) hash.update(`${f.name}\0${f.mode}\0${f.body.length}\0`).update(f.body)
  return { files, hash: hash.digest('hex').slice(0, 16) }
}
