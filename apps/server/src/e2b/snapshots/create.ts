// POST /sandboxes/{id}/snapshots: a snapshot of the sandbox, optionally named.
import { SnapshotName } from '@forkbox/protocol'
import { z } from 'zod'
import { withApiKey } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { liveSandbox } from '../live-sandbox.ts'
import type { E2bApp } from '../route-module.ts'
import { snapshotInfo } from './snapshot-info.ts'

const SnapshotBody = z.object({ name: SnapshotName.optional() }).passthrough()

export function register(app: E2bApp): void {
  app.post(
    '/sandboxes/:id/snapshots',
    withApiKey(async (c, owner) => {
      const s = await liveSandbox(c, owner, c.req.param('id') as string)
      const { name } = await jsonBody(c, SnapshotBody)
      const snap = await c.var.services.sandboxes.snapshot(owner, s.id, { name })
      return c.json(snapshotInfo(snap), 201)
    }),
  )
}
