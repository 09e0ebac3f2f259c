// filesystem.Filesystem/Move: renames an entry.
import { sandboxUnary } from '../connect.ts'
import { entryInfo } from '../entry-info.ts'
import { MoveRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/Move',
    sandboxUnary(MoveRequest, async (call, { source: from, destination: to }) => {
      const e = await call.services.files.rename(call.owner, call.sandboxId, {
        from,
        to,
        user: call.user,
      })
      return { entry: entryInfo(e) }
    }),
  )
}
