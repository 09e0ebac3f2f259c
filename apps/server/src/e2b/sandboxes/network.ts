// PUT /sandboxes/{id}/network: E2B replaces the whole egress configuration; what is left out is
// cleared (open internet).
import { NetworkOptions } from '@forkbox/protocol'
import { z } from 'zod'
import { validationError } from '../../http/errors.ts'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import { E2bNetwork, toForkbox } from '../network.ts'
import type { E2bApp } from '../route-module.ts'

const NetworkUpdate = E2bNetwork.extend({ allow_internet_access: z.boolean().nullish() })

export function register(app: E2bApp): void {
  app.put(
    '/sandboxes/:id/network',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      const req = await jsonBody(c, NetworkUpdate)
      const policy = toForkbox(req.allow_internet_access, req) ?? { internet: true, allowOut: [], denyOut: [] }
      const parsed = NetworkOptions.safeParse(policy)
      if (!parsed.success) throw validationError(parsed.error)
      await c.var.services.sandboxes.updateNetwork(owner, s.id, parsed.data)
      return c.body(null, 204)
    }),
  )
}
