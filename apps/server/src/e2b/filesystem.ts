// envd's `filesystem.Filesystem` Connect service (Stat, MakeDir, Move, ListDir, Remove) over
// forkbox's file operations; the watches are in e2b/watch.ts.
import { AppError, type GuestFileOp, SandboxPath } from '@forkbox/protocol'
import type { Hono } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { sandboxUnary } from './connect.ts'
import { entryInfo } from './entry-info.ts'
import { ListDirRequest, MoveRequest, PathRequest } from './messages.ts'
import type { SandboxCall } from './sandbox-call.ts'
import { registerWatch } from './watch.ts'

/** A sandbox path from a request field, checked as forkbox checks its own. */
export function pathOf(value: unknown, field = 'path'): string {
  const parsed = SandboxPath.safeParse(value)
  if (!parsed.success) throw new AppError('INVALID_PATH', `${field}: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  return parsed.data
}

function fileOp<R extends GuestFileOp>(call: SandboxCall, op: R) {
  return call.services.calls.fileOp(call.owner, call.sandboxId, op)
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
