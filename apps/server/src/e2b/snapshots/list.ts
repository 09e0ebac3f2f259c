// GET /snapshots: the caller's snapshots, by ?sandboxID and ?name if given.
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'
import { snapshotInfo } from './snapshot-info.ts'

export function register(app: E2bApp): void {
  app.get(
    '/snapshots',
    withApiKey(async (c, owner) => {
      const sandboxId = c.req.query('sandboxID')
      const name = c.req.query('name')
      const snaps = (await c.var.services.sandboxes.listSnapshots(owner, name ? { name } : {})).filter(
        (s) => !sandboxId || s.sandboxId === sandboxId,
      )
      return c.json(snaps.map(snapshotInfo), 200)
    }),
  )
}
