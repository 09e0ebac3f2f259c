// filesystem.Filesystem/Stat: one entry.
import { sandboxUnary } from '../connect.ts'
import { entryInfo } from '../entry-info.ts'
import { PathRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/Stat',
    sandboxUnary(PathRequest, async (call, req) => {
      const e = await call.services.files.stat(call.owner, call.sandboxId, {
        path: req.path,
        user: call.user,
      })
      return { entry: entryInfo(e) }
    }),
  )
}
