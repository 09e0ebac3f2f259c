// GET /v2/sandboxes: the caller's sandboxes a page at a time (?limit, at most 100; ?nextToken from
// the last page's X-Next-Token, an opaque offset).
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'
import { info } from '../sandbox-info.ts'
import { listed } from './listed.ts'

const encodeToken = (offset: number) => Buffer.from(String(offset)).toString('base64url')
const decodeToken = (token: string | undefined) => Number(Buffer.from(token ?? '', 'base64url').toString()) || 0

export function register(app: E2bApp): void {
  app.get(
    '/v2/sandboxes',
    withApiKey(async (c, owner) => {
      const all = await listed(c, owner)
      const limit = Math.min(Math.max(Number(c.req.query('limit')) || 100, 1), 100)
      const offset = decodeToken(c.req.query('nextToken'))
      const page = all.slice(offset, offset + limit)
      if (offset + limit < all.length) c.header('X-Next-Token', encodeToken(offset + limit))
      return c.json(page.map(info), 200)
    }),
  )
}
