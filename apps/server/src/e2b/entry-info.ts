// envd's EntryInfo (proto3 JSON) of a forkbox FileEntry: what Stat, ListDir and a watch's events
// carry, beside the request messages (messages.ts) they answer.
import { posix } from 'node:path'
import type { FileEntry } from '@forkbox/protocol'

// filesystem.FileType
const FILE_TYPE = { file: 1, dir: 2, symlink: 3, other: 0 } as const
// the template's users (templates/*: root, and `user` with uid 1000)
const USER_NAMES: Record<number, string> = { 0: 'root', 1000: 'user' }

/** `ls -l`-style permissions, as Go's FileMode.String() prints them (what envd sends). */
function permissions(e: FileEntry): string {
  const kind = e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'L' : '-'
  let out = kind
  for (let shift = 6; shift >= 0; shift -= 3) {
    const bits = (e.mode >> shift) & 7
    out += `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${bits & 1 ? 'x' : '-'}`
  }
  return out
}

/** forkbox's FileEntry as envd's EntryInfo (proto3 JSON). */
export function entryInfo(e: FileEntry) {
  return {
    name: e.name,
    type: FILE_TYPE[e.type],
    path: e.path,
    size: String(e.size),
    mode: e.mode,
    permissions: permissions(e),
    owner: USER_NAMES[e.uid] ?? String(e.uid),
    group: USER_NAMES[e.gid] ?? String(e.gid),
    modifiedTime: new Date(e.mtimeMs).toISOString(),
    // envd gives a link's target as an absolute path (a relative one resolved from the link's dir)
    ...(e.target !== undefined ? { symlinkTarget: posix.resolve(posix.dirname(e.path), e.target) } : {}),
    ...(e.metadata ? { metadata: e.metadata } : {}),
  }
}
