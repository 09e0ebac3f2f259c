// GET /sandboxes/{id}: the sandbox, with its envd access token and domain.
import { accessToken, withApiKey } from '../auth.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'
import { info } from '../sandbox-info.ts'

export function register(app: E2bApp): void {
  app.get(
    '/sandboxes/:id',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      return c.json({ ...info(s), envdAccessToken: accessToken(c, s.id), domain: s.domain }, 200)
    }),
  )
}
