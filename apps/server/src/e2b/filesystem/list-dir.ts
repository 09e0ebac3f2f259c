// filesystem.Filesystem/ListDir: a directory's entries, `depth` levels down (1 to 16).
import { sandboxUnary } from '../connect.ts'
import { entryInfo } from '../entry-info.ts'
import { ListDirRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/ListDir',
    sandboxUnary(ListDirRequest, async (call, req) => {
      const depth = Math.min(Math.max(Number(req.depth) || 1, 1), 16)
      const entries = await call.services.files.list(call.owner, call.sandboxId, {
        path: req.path,
        depth,
        user: call.user,
        metadata: true,
      })
      return { entries: entries.map(entryInfo) }
    }),
  )
}
