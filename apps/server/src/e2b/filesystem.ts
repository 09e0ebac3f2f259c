// envd's `filesystem.Filesystem` Connect service (Stat, MakeDir, Move, ListDir, Remove) over
// forkbox's file operations; the watches are in e2b/watch.ts.
import { posix } from 'node:path'
import { AppError, type FileEntry, type GuestFileOp, SandboxPath } from '@forkbox/protocol'
import type { Hono } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { sandboxUnary } from './connect.ts'
import { ListDirRequest, MoveRequest, PathRequest } from './messages.ts'
import type { SandboxCall } from './sandbox-call.ts'
import { registerWatch } from './watch.ts'

/** A sandbox path from a request field, checked as forkbox checks its own. */
export function pathOf(value: unknown, field = 'path'): string {
  const parsed = SandboxPath.safeParse(value)
  if (!parsed.success) throw new AppError('INVALID_PATH', `${field}: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  return parsed.data
}

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

function fileOp<R extends GuestFileOp>(call: SandboxCall, op: R) {
  return call.services.sandboxes.fileOp(call.owner, call.sandboxId, op)
}

async function stat(call: SandboxCall, req: z.output<typeof PathRequest>) {
  const e = await fileOp(call, { op: 'stat', path: req.path, user: call.user })
  return { entry: entryInfo(e) }
}

/** envd's MakeDir fails with already_exists when the directory is there (the client returns false). */
async function makeDir(call: SandboxCall, { path }: z.output<typeof PathRequest>) {
  const existing = await fileOp(call, { op: 'stat', path, user: call.user }).catch((err: unknown) => {
    if (err instanceof AppError && err.code === 'FILE_NOT_FOUND') return null
    throw err
  })
  if (existing) throw new AppError('FILE_EXISTS', `${path} already exists`)
  const e = await fileOp(call, { op: 'mkdir', path, user: call.user })
  return { entry: entryInfo(e) }
}

async function move(call: SandboxCall, { source: from, destination: to }: z.output<typeof MoveRequest>) {
  const e = await fileOp(call, { op: 'rename', from, to, user: call.user })
  return { entry: entryInfo(e) }
}

async function listDir(call: SandboxCall, req: z.output<typeof ListDirRequest>) {
  const depth = Math.min(Math.max(Number(req.depth) || 1, 1), 16)
  const entries = await fileOp(call, { op: 'list', path: req.path, depth, user: call.user, metadata: true })
  return { entries: entries.map(entryInfo) }
}

/** envd's Remove of a path that is not there succeeds (the client's `remove` is idempotent). */
async function remove(call: SandboxCall, req: z.output<typeof PathRequest>) {
  await fileOp(call, { op: 'remove', path: req.path, recursive: true, user: call.user }).catch((err: unknown) => {
    if (!(err instanceof AppError && err.code === 'FILE_NOT_FOUND')) throw err
  })
  return {}
}

export function registerFilesystem(app: Hono<AppEnv>): void {
  app.post('/filesystem.Filesystem/Stat', sandboxUnary(PathRequest, stat))
  app.post('/filesystem.Filesystem/MakeDir', sandboxUnary(PathRequest, makeDir))
  app.post('/filesystem.Filesystem/Move', sandboxUnary(MoveRequest, move))
  app.post('/filesystem.Filesystem/ListDir', sandboxUnary(ListDirRequest, listDir))
  app.post('/filesystem.Filesystem/Remove', sandboxUnary(PathRequest, remove))
  registerWatch(app)
}
