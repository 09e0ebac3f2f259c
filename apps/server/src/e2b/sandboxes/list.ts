// GET /sandboxes: the caller's running and paused sandboxes, all in one answer.
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'
import { info } from '../sandbox-info.ts'
import { listed } from './listed.ts'

export function register(app: E2bApp): void {
  app.get(
    '/sandboxes',
    withApiKey(async (c, owner) => c.json((await listed(c, owner)).map(info), 200)),
  )
}
