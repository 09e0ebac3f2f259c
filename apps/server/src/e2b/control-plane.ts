// E2B's control-plane REST API (api.e2b.app) over forkbox's SandboxService: create, connect
// (resumes), list, get, kill, timeout, pause (hibernate), fork, snapshots, metrics and egress.
import {
  AppError,
  CreateSandboxRequest,
  EnvVars,
  MAX_FORK_COUNT,
  MAX_TTL_SECONDS,
  Metadata,
  NetworkOptions,
  type Sandbox,
  type Snapshot,
  SnapshotName,
} from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { validationError } from '../http/errors.ts'
import { readOnlyRefusal } from '../http/tenancy.ts'
import { accessToken, requireApiKey } from './auth.ts'
import { jsonBody } from './json-body.ts'
import { E2bNetwork, toE2b, toForkbox } from './network.ts'

/**
 * The envd version the clients are told: ≥ 0.4.0 (no username sent for the default user),
 * ≥ 0.5.2 (closeStdin), ≥ 0.5.7 (octet-stream uploads), ≥ 0.6.2 (file metadata), ≥ 0.6.3 (the
 * entry with a watch event). Not 0.6.4: watches on network mounts (there are none to watch).
 */
export const ENVD_VERSION = '0.6.3'

/** E2B template ids → forkbox templates; any other id is taken as a forkbox template name. */
const TEMPLATE_ALIASES: Record<string, string> = { 'code-interpreter-v1': 'code-interpreter' }
/** The E2B ids that name a built-in (a user's template may not take them). */
export const E2B_TEMPLATE_IDS: ReadonlySet<string> = new Set(Object.keys(TEMPLATE_ALIASES))
/** forkbox's name for an E2B template id. */
export const forkboxTemplate = (id: string): string => TEMPLATE_ALIASES[id] ?? id
const e2bTemplateId = (template: string) => (template === 'code-interpreter' ? 'code-interpreter-v1' : template)

type Handler = (c: Context<AppEnv>, owner: string) => Promise<Response>

/** An authenticated control-plane handler (what it throws goes out E2B-shaped: the layer's onError). */
const rest = (fn: Handler) => (c: Context<AppEnv>) => fn(c, requireApiKey(c))

const ttl = z.number().int().min(1).max(MAX_TTL_SECONDS)

const PauseBody = z.object({ memory: z.boolean().nullish() }).passthrough()

const NewSandbox = z
  .object({
    templateID: z.string().min(1).max(128).default('base'),
    timeout: ttl.optional(),
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

const SetTimeout = z.object({ timeout: ttl }).passthrough()
const NetworkUpdate = E2bNetwork.extend({ allow_internet_access: z.boolean().nullish() })
const ConnectBody = z.object({ timeout: ttl.optional() }).passthrough()
const ForkBody = z
  .object({ timeout: ttl.optional(), count: z.number().int().min(1).max(MAX_FORK_COUNT).default(1) })
  .passthrough()

function unsupported(what: string, instead: string): never {
  throw new AppError('NOT_IMPLEMENTED', `${what} is not supported by forkbox; ${instead}`)
}

/** What GET /sandboxes/{id} and the list return. */
function info(s: Sandbox) {
  return {
    sandboxID: s.id,
    templateID: e2bTemplateId(s.template),
    alias: s.template,
    clientID: 'forkbox',
    startedAt: s.createdAt,
    endAt: s.expiresAt,
    cpuCount: s.resources.vcpus,
    memoryMB: s.resources.memoryMB,
    diskSizeMB: s.resources.diskMB,
    metadata: s.metadata,
    state: s.state === 'hibernated' ? 'paused' : 'running',
    envdVersion: ENVD_VERSION,
    // forkbox wakes a hibernated sandbox on any call: auto-resume is always on where pause is
    lifecycle: { onTimeout: s.onTimeout === 'kill' ? 'kill' : 'pause', autoResume: s.onTimeout !== 'kill' },
    ...toE2b(s.network),
  }
}

/** What create, connect and fork return: how to reach the sandbox's envd. */
function connection(c: Context<AppEnv>, s: Sandbox) {
  const token = accessToken(c, s.id)
  return {
    sandboxID: s.id,
    templateID: e2bTemplateId(s.template),
    alias: s.template,
    clientID: 'forkbox',
    envdVersion: ENVD_VERSION,
    envdAccessToken: token,
    // the interpreter's context calls send only this one
    trafficAccessToken: token,
    // the clients address envd at `49983-{id}.{domain}` unless E2B_SANDBOX_URL says otherwise
    domain: s.domain,
  }
}

/** A sandbox that still exists in E2B's sense: running or paused (a killed one is gone: 404). */
async function live(c: Context<AppEnv>, owner: string, id: string): Promise<Sandbox> {
  const s = await c.var.services.sandboxes.get(owner, id)
  if (s.state === 'errored')
    throw new AppError('SANDBOX_ERRORED', `sandbox ${id} errored: ${s.errorMessage ?? s.errorReason}`, {
      reason: s.errorReason,
    })
  if (s.state === 'killed') throw new AppError('SANDBOX_NOT_FOUND', `sandbox ${id} was killed`)
  return s
}

const create: Handler = async (c, owner) => {
  const req = await jsonBody(c, NewSandbox)
  // lifecycle.onTimeout: 'pause' is forkbox's onTimeout: 'hibernate' (memory and disk kept; any
  // call wakes it); with keepMemory: false, 'hibernate-disk' (it wakes as if booted)
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
}

/** Connect: resumes a paused sandbox; a timeout only ever extends a running one. */
const connect: Handler = async (c, owner) => {
  const id = c.req.param('id') as string
  const req = await jsonBody(c, ConnectBody)
  const sandboxes = c.var.services.sandboxes
  const before = await live(c, owner, id)
  if (before.state === 'hibernated') await c.var.services.calls.onSandbox(owner, id, async () => {})
  let s = await sandboxes.get(owner, id)
  if (req.timeout && Date.now() + req.timeout * 1000 > Date.parse(s.expiresAt)) {
    // connect is a read (e2b/scopes.ts) up to here: lengthening the sandbox's life is a write
    if (c.var.principal.scopes.readOnly) throw readOnlyRefusal()
    s = await sandboxes.setTimeout(owner, id, req.timeout)
  }
  return c.json(connection(c, s), before.state === 'hibernated' ? 201 : 200)
}

/** E2B's nextToken: an opaque offset. */
const encodeToken = (offset: number) => Buffer.from(String(offset)).toString('base64url')
const decodeToken = (token: string | undefined) => Number(Buffer.from(token ?? '', 'base64url').toString()) || 0

/** `metadata=k%3Dv%26k2%3Dv2`: the clients percent-encode each key and value, then the whole. */
function metadataFilter(query: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of new URLSearchParams(query ?? '')) out[decodeURIComponent(k)] = decodeURIComponent(v)
  return out
}

async function listed(c: Context<AppEnv>, owner: string): Promise<Sandbox[]> {
  const states = new Set((c.req.query('state') ?? 'running,paused').split(','))
  const template = c.req.query('template')
  const after = Date.parse(c.req.query('startedAfter') ?? '') || 0
  return (await c.var.services.sandboxes.list(owner, { metadata: metadataFilter(c.req.query('metadata')) }))
    .filter(
      (s) => (s.state === 'running' && states.has('running')) || (s.state === 'hibernated' && states.has('paused')),
    )
    .filter((s) => !template || forkboxTemplate(template) === s.template)
    .filter((s) => Date.parse(s.createdAt) >= after)
    .sort((a, b) => (c.req.query('order') === 'asc' ? 1 : -1) * a.createdAt.localeCompare(b.createdAt))
}

const listV2: Handler = async (c, owner) => {
  const all = await listed(c, owner)
  const limit = Math.min(Math.max(Number(c.req.query('limit')) || 100, 1), 100)
  const offset = decodeToken(c.req.query('nextToken'))
  const page = all.slice(offset, offset + limit)
  if (offset + limit < all.length) c.header('X-Next-Token', encodeToken(offset + limit))
  return c.json(page.map(info), 200)
}

const list: Handler = async (c, owner) => c.json((await listed(c, owner)).map(info), 200)

const get: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  return c.json({ ...info(s), envdAccessToken: accessToken(c, s.id), domain: s.domain }, 200)
}

const kill: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  await c.var.services.sandboxes.kill(owner, s.id)
  return c.body(null, 204)
}

const setTimeout: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  c.var.services.sandboxes.setTimeout(owner, s.id, (await jsonBody(c, SetTimeout)).timeout)
  return c.body(null, 204)
}

/**
 * Pause is forkbox's hibernate (memory, processes and disk kept; with `memory: false` only the
 * disk); 409 when already paused.
 */
const pause: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  const { memory } = await jsonBody(c, PauseBody)
  await c.var.services.sandboxes.hibernate(owner, s.id, { keepMemory: memory !== false })
  return c.body(null, 204)
}

const fork: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  const req = await jsonBody(c, ForkBody)
  const forks = await c.var.services.sandboxes.fork(owner, s.id, {
    count: req.count,
    ttlSeconds: req.timeout ?? 300,
  })
  return c.json(
    forks.map((f) => ({ sandbox: connection(c, f) })),
    201,
  )
}

const MiB = 1024 * 1024

/** forkbox's usage samples (every 5 s, cumulative CPU seconds) as E2B's metrics (CPU % of the sandbox's vCPUs). */
const metrics: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  const diskUsed = s.state === 'running' ? await c.var.services.calls.diskUsage(owner, s.id) : 0
  const from = (Number(c.req.query('start')) || 0) * 1000
  const to = (Number(c.req.query('end')) || Number.POSITIVE_INFINITY) * 1000
  const samples = c.var.services.metrics.samplesOf(s.id)
  const out = samples.flatMap((x, i) => {
    const at = Date.parse(x.at)
    if (at < from || at > to) return []
    const prev = samples[i - 1]
    const seconds = prev ? (at - Date.parse(prev.at)) / 1000 : 0
    const busy = prev && seconds > 0 ? (x.cpuSeconds - prev.cpuSeconds) / seconds / s.resources.vcpus : 0
    return [
      {
        timestamp: x.at,
        timestampUnix: Math.floor(at / 1000),
        cpuUsedPct: Math.round(Math.max(0, busy) * 10_000) / 100,
        cpuCount: s.resources.vcpus,
        memUsed: x.memoryBytes,
        memTotal: s.resources.memoryMB * MiB,
        memCache: 0,
        diskUsed,
        diskTotal: s.resources.diskMB * MiB,
      },
    ]
  })
  return c.json(out, 200)
}

/** E2B replaces the whole egress configuration: what is left out is cleared (open internet). */
const updateNetwork: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  const req = await jsonBody(c, NetworkUpdate)
  const policy = toForkbox(req.allow_internet_access, req) ?? { internet: true, allowOut: [], denyOut: [] }
  const parsed = NetworkOptions.safeParse(policy)
  if (!parsed.success) throw validationError(parsed.error)
  await c.var.services.sandboxes.updateNetwork(owner, s.id, parsed.data)
  return c.body(null, 204)
}

const SnapshotBody = z.object({ name: SnapshotName.optional() }).passthrough()

/** A snapshot as E2B lists it: its names (what `Sandbox.create` takes) are its name, if given, and its id. */
const snapshotInfo = (s: Snapshot) => ({ snapshotID: s.id, names: s.name ? [s.name, s.id] : [s.id] })

const createSnapshot: Handler = async (c, owner) => {
  const s = await live(c, owner, c.req.param('id') as string)
  const { name } = await jsonBody(c, SnapshotBody)
  const snap = await c.var.services.sandboxes.snapshot(owner, s.id, { name })
  return c.json(snapshotInfo(snap), 201)
}

const listSnapshots: Handler = async (c, owner) => {
  const sandboxId = c.req.query('sandboxID')
  const name = c.req.query('name')
  const snaps = (await c.var.services.sandboxes.listSnapshots(owner, name ? { name } : {})).filter(
    (s) => !sandboxId || s.sandboxId === sandboxId,
  )
  return c.json(snaps.map(snapshotInfo), 200)
}

/** DELETE /templates/{id}: a snapshot (the clients delete them this way) or one of the key's templates, by name. */
const deleteTemplate: Handler = async (c, owner) => {
  const id = c.req.param('id') as string
  if (id.startsWith('snap-')) await c.var.services.sandboxes.deleteSnapshot(owner, id)
  else await c.var.services.templates.delete(owner, id)
  return c.body(null, 204)
}

const notServed = (what: string, instead: string) => rest(async () => unsupported(what, instead))

export function registerControlPlane(app: Hono<AppEnv>): void {
  app.post('/v2/sandboxes', rest(create))
  app.post('/sandboxes', rest(create))
  app.get('/v2/sandboxes', rest(listV2))
  app.get('/sandboxes', rest(list))
  app.get('/sandboxes/:id', rest(get))
  app.delete('/sandboxes/:id', rest(kill))
  app.post('/v2/sandboxes/:id/connect', rest(connect))
  app.post('/sandboxes/:id/connect', rest(connect))
  app.post('/sandboxes/:id/resume', rest(connect))
  app.post('/sandboxes/:id/timeout', rest(setTimeout))
  app.post('/sandboxes/:id/pause', rest(pause))
  app.post('/sandboxes/:id/fork', rest(fork))
  app.post('/sandboxes/:id/snapshots', rest(createSnapshot))
  app.get('/snapshots', rest(listSnapshots))
  app.delete('/templates/:id', rest(deleteTemplate))
  app.put('/sandboxes/:id/network', rest(updateNetwork))
  app.get('/sandboxes/:id/metrics', rest(metrics))
  app.get('/sandboxes/:id/logs', notServed('sandbox logs', 'use GET /v1/sandboxes/{id}/events'))
  app.all('/templates', notServed('listing templates this way', 'use GET /v1/templates'))
  app.all('/templates/tags', notServed('template tags', 'every build is a new version: create from name@version'))
  app.all('/templates/:id/tags', notServed('template tags', 'every build is a new version: create from name@version'))
  app.all('/v2/templates', notServed('this template call', 'build with Template.build (POST /v3/templates)'))
  app.all('/volumes/*', notServed('volumes', 'use files.write'))
}
