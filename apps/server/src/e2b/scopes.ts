// Which E2B calls write, for a read-only key and every token of its sandboxes (http/tenancy.ts):
// envd's Connect calls are all POSTs, so their method names say; a control-plane connect is a
// read unless it lengthens the sandbox's life (sandboxes/connect.ts checks that part).
import type { Context } from 'hono'
import type { AppEnv } from '../http/env.ts'

/**
 * Every Connect method envd serves (process/, filesystem/). Reads only look: they
 * match forkbox's own GET routes (a process's output, a directory's listing or its changes).
 */
export const CONNECT_METHODS = {
  'process.Process/Start': 'write',
  'process.Process/Connect': 'read',
  'process.Process/List': 'read',
  'process.Process/SendInput': 'write',
  'process.Process/SendSignal': 'write',
  'process.Process/CloseStdin': 'write',
  'process.Process/Update': 'write',
  'process.Process/StreamInput': 'write',
  'filesystem.Filesystem/Stat': 'read',
  'filesystem.Filesystem/ListDir': 'read',
  'filesystem.Filesystem/MakeDir': 'write',
  'filesystem.Filesystem/Move': 'write',
  'filesystem.Filesystem/Remove': 'write',
  'filesystem.Filesystem/WatchDir': 'read',
  'filesystem.Filesystem/CreateWatcher': 'read',
  'filesystem.Filesystem/GetWatcherEvents': 'read',
  'filesystem.Filesystem/RemoveWatcher': 'read',
} as const satisfies Record<string, 'read' | 'write'>

const CONNECT_PATH = /^\/(process\.Process|filesystem\.Filesystem)\/[^/]+$/
/** Sandbox.connect: hands out the envd token and wakes a paused sandbox, as any read does. */
const CONTROL_PLANE_CONNECT = /^\/(v2\/)?sandboxes\/[^/]+\/connect$/

/** `c.var.writes` for the E2B routes: a Connect method not listed counts as a write. */
export function e2bWrites(c: Context<AppEnv>): boolean {
  const path = c.req.path
  if (CONNECT_PATH.test(path)) return CONNECT_METHODS[path.slice(1) as keyof typeof CONNECT_METHODS] !== 'read'
  if (c.req.method === 'POST' && CONTROL_PLANE_CONNECT.test(path)) return false
  return c.req.method !== 'GET' && c.req.method !== 'HEAD'
}
