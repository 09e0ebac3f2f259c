// POST /sandboxes/{id}/connect (and /v2/.../connect, /resume): resumes a paused sandbox (201) or
// answers a running one (200) with how to reach its envd; a timeout only ever extends its life.
import { z } from 'zod'
import { readOnlyRefusal } from '../../http/tenancy.ts'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'
import { connection } from '../sandbox-info.ts'
import { TimeoutSeconds } from './timeout-seconds.ts'

const ConnectBody = z.object({ timeout: TimeoutSeconds.optional() }).passthrough()

const connect = withApiKey(async (c, owner) => {
  const id = c.req.param('id') as string
  const req = await jsonBody(c, ConnectBody)
  const sandboxes = c.var.services.sandboxes
  const before = await liveSandbox(c, owner, id)
  if (before.state === 'hibernated') await c.var.services.calls.onSandbox(owner, id, async () => {})
  let s = await sandboxes.get(owner, id)
  if (req.timeout && Date.now() + req.timeout * 1000 > Date.parse(s.expiresAt)) {
    // connect is a read (e2b/scopes.ts) up to here: lengthening the sandbox's life is a write
    if (c.var.principal.scopes.readOnly) throw readOnlyRefusal()
    s = await sandboxes.setTimeout(owner, id, req.timeout)
  }
  return c.json(connection(c, s), before.state === 'hibernated' ? 201 : 200)
})

export function register(app: E2bApp): void {
  app.post('/v2/sandboxes/:id/connect', connect)
  app.post('/sandboxes/:id/connect', connect)
  app.post('/sandboxes/:id/resume', connect)
}
