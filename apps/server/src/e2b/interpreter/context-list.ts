// GET /contexts: the sandbox's code contexts.
import type { E2bApp } from '../route-module.ts'
import { contextInfo } from './context-info.ts'
import { interpreterHandler } from './handler.ts'

export function register(app: E2bApp): void {
  app.get(
    '/contexts',
    interpreterHandler(async (c, call) =>
      c.json((await call.services.code.listContexts(call.owner, call.sandboxId)).map(contextInfo), 200),
    ),
  )
}
