// filesystem.Filesystem/Remove: envd's Remove of a path that is not there succeeds (the client's
// `remove` is idempotent).
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { PathRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/Remove',
    sandboxUnary(PathRequest, async (call, req) => {
      await call.services.files
        .remove(call.owner, call.sandboxId, { path: req.path, recursive: true, user: call.user })
        .catch((err: unknown) => {
          if (!(err instanceof AppError && err.code === 'FILE_NOT_FOUND')) throw err
        })
      return {}
    }),
  )
}
