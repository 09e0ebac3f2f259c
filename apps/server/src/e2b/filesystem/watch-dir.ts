// filesystem.Filesystem/WatchDir: streams a directory's changes until the client goes.
import { sandboxStream } from '../connect.ts'
import { WatchDirRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'
import { fsEvent, startWatch } from './watch-events.ts'

export function register(app: E2bApp): void {
  app.post(
    '/filesystem.Filesystem/WatchDir',
    sandboxStream(WatchDirRequest, { keepalive: {} }, async (_c, call, req, out) => {
      const { started, done } = startWatch(
        call,
        req,
        async (changes) => {
          for (const e of changes) await out.send({ filesystem: await fsEvent(call, e, req.includeEntry) })
        },
        out.signal,
      )
      await started
      await out.send({ start: {} })
      await done
    }),
  )
}
