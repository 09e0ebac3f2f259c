// POST /sandboxes (and /v2/sandboxes): a sandbox from a template or a snapshot. lifecycle.onTimeout
// 'pause' is forkbox's onTimeout 'hibernate' (memory and disk kept; any call wakes it); with
// autoPauseMemory false, 'hibernate-disk' (it wakes as if booted).
import { CreateSandboxRequest, EnvVars, Metadata } from '@forkbox/protocol'
import { z } from 'zod'
import { validationError } from '../../http/errors.ts'
import { withApiKey } from '../auth.ts'
import { unsupported } from '../errors.ts'
import { jsonBody } from '../json-body.ts'
import { E2bNetwork, toForkbox } from '../network.ts'
import type { E2bApp } from '../route-module.ts'
import { connection } from '../sandbox-info.ts'
import { forkboxTemplate } from '../template-ids.ts'
import { TimeoutSeconds } from './timeout-seconds.ts'

const NewSandbox = z
  .object({
    templateID: z.string().min(1).max(128).default('base'),
    timeout: TimeoutSeconds.optional(),
    metadata: Metadata.nullish(),
    envVars: EnvVars.nullish(),
    autoPause: z.boolean().nullish(),
    autoPauseMemory: z.boolean().nullish(),
    autoResume: z.object({ enabled: z.boolean().nullish() }).passthrough().nullish(),
    secure: z.boolean().nullish(),
    allow_internet_access: z.boolean().nullish(),
    network: E2bNetwork.nullish(),
    mcp: z.unknown().optional(),
    volumeMounts: z.array(z.unknown()).nullish(),
  })
  .passthrough()

const create = withApiKey(async (c, owner) => {
  const req = await jsonBody(c, NewSandbox)
  if (req.mcp) unsupported('mcp', 'run the MCP server yourself with commands.run')
  if (req.volumeMounts?.length) unsupported('volumeMounts', 'use files.write')
  const network = toForkbox(req.allow_internet_access, req.network)
  const template = forkboxTemplate(req.templateID)
  // a snapshot id, or the name given to one of the key's snapshots, starts from that snapshot
  const fromSnapshot =
    template.startsWith('snap-') || (await c.var.services.sandboxes.hasSnapshot(owner, req.templateID))
  const parsed = CreateSandboxRequest.safeParse({
    ...(fromSnapshot ? { snapshot: template.startsWith('snap-') ? template : req.templateID } : { template }),
    ttlSeconds: req.timeout ?? 300,
    metadata: req.metadata ?? {},
    envs: req.envVars ?? {},
    ...(network ? { network } : {}),
    onTimeout: req.autoPause ? (req.autoPauseMemory === false ? 'hibernate-disk' : 'hibernate') : 'kill',
  })
  if (!parsed.success) throw validationError(parsed.error)
  const sbx = await c.var.services.sandboxes.create(owner, parsed.data, c.req.raw.signal)
  return c.json(connection(c, sbx), 201)
})

export function register(app: E2bApp): void {
  app.post('/v2/sandboxes', create)
  app.post('/sandboxes', create)
}
