// filesystem.Filesystem/RemoveWatcher: stops a polled watcher.
import { sandboxUnary } from '../connect.ts'
import { WatcherRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'

export function register(app: E2bApp, { watchers }: E2bLayer): void {
  app.post(
    '/filesystem.Filesystem/RemoveWatcher',
    sandboxUnary(WatcherRequest, async (call, req) => watchers.remove(call, req.watcherId)),
  )
}
