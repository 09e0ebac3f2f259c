// filesystem.Filesystem/GetWatcherEvents: what a polled watcher collected since the last poll.
import { sandboxUnary } from '../connect.ts'
import { WatcherRequest } from '../messages.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'

export function register(app: E2bApp, { watchers }: E2bLayer): void {
  app.post(
    '/filesystem.Filesystem/GetWatcherEvents',
    sandboxUnary(WatcherRequest, async (call, req) => watchers.poll(call, req.watcherId)),
  )
}
