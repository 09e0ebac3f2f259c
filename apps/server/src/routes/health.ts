import { FORKBOX_VERSION } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../http/env.ts'
import { tagged } from './tags.ts'

const route = createRoute({
  method: 'get',
  path: '/healthz',
  tags: tagged('Health'),
  summary: "Liveness and the server's version (no key needed)",
  responses: {
    200: {
      description: 'Up',
      content: { 'application/json': { schema: z.object({ ok: z.boolean(), version: z.string() }) } },
    },
  },
})

export function register(app: App): void {
  app.openapi(route, (c) => c.json({ ok: true, version: FORKBOX_VERSION }, 200))
}
