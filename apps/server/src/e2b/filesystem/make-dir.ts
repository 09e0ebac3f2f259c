// filesystem.Filesystem/MakeDir: envd's fails with already_exists when the directory is there (the
// client returns false).
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { entryInfo } from '../entry-info.ts'
import { PathRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/MakeDir',
    sandboxUnary(PathRequest, async (call, { path }) => {
      const { files } = call.services
      const existing = await files.stat(call.owner, call.sandboxId, { path, user: call.user }).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'FILE_NOT_FOUND') return null
        throw err
      })
      if (existing) throw new AppError('FILE_EXISTS', `${path} already exists`)
      const e = await files.mkdir(call.owner, call.sandboxId, { path, user: call.user })
      return { entry: entryInfo(e) }
    }),
  )
}
