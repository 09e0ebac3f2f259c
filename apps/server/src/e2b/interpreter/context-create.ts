// POST /contexts: a new code context (python unless the client names a language).
import { z } from 'zod'
import { jsonBody } from '../json-body.ts'
import type { E2bApp } from '../route-module.ts'
import { contextInfo } from './context-info.ts'
import { interpreterHandler } from './handler.ts'
import { language } from './language.ts'

const ContextBody = z.object({ language: z.string().nullish(), cwd: z.string().nullish() }).passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/contexts',
    interpreterHandler(async (c, call) => {
      const body = await jsonBody(c, ContextBody)
      const ctx = await call.services.code.createContext(call.owner, call.sandboxId, {
        language: language(body.language) ?? 'python',
        cwd: body.cwd ?? undefined,
      })
      return c.json(contextInfo(ctx), 200)
    }),
  )
}
