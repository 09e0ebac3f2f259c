// filesystem.Filesystem/CreateWatcher: starts a polled watcher (filesystem/watchers.ts).
import { sandboxUnary } from '../connect.ts'
import { WatchDirRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'

export function register(app: E2bApp, { watchers }: E2bLayer): void {
  app.post(
    '/filesystem.Filesystem/CreateWatcher',
    sandboxUnary(WatchDirRequest, (call, req) => watchers.create(call, req)),
  )
}
