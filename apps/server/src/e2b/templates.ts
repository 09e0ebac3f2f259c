// E2B's template builder routes (`Template.build` in the 2.x clients): request a build, upload each
// `copy()`'s files (to a URL on forkbox itself), start it with its steps, poll its status and log.
import { AppError } from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { uploadBody } from '../http/upload.ts'
import { requireApiKey } from './auth.ts'
import { jsonBody } from './json-body.ts'
import { E2bBuildStart } from './template-dockerfile.ts'

/** Where the clients PUT a `copy()`'s files: outside the API-key routes, authorized by the URL's token. */
export const UPLOAD_PATH = '/e2b-uploads'
/** How long an upload URL is good for (the clients use it at once). */
const UPLOAD_URL_SECONDS = 3600

const BuildRequest = z
  .object({
    name: z.string().max(128).nullish(),
    alias: z.string().max(128).nullish(),
    tags: z.array(z.string()).nullish(),
    cpuCount: z.number().int().min(1).max(64).nullish(),
    memoryMB: z.number().int().min(64).nullish(),
    minFreeDiskMb: z.number().nullish(),
  })
  .passthrough()

const FilesHash = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'a files hash is 1-128 of A-Z, a-z, 0-9, _ and -')

type Handler = (c: Context<AppEnv>, owner: string) => Promise<Response>
const rest = (fn: Handler) => (c: Context<AppEnv>) => fn(c, requireApiKey(c))
const param = (c: Context<AppEnv>, name: string) => c.req.param(name) as string

function filesHash(c: Context<AppEnv>): string {
  const parsed = FilesHash.safeParse(param(c, 'hash'))
  if (!parsed.success) throw new AppError('VALIDATION_FAILED', parsed.error.issues[0]?.message ?? 'bad files hash')
  return parsed.data
}

const uploadId = (owner: string, hash: string, expires: number) => `${owner}:${hash}:${expires}`

const requestBuild: Handler = async (c, owner) => {
  const req = await jsonBody(c, BuildRequest)
  const { templateID, buildID } = await c.var.services.e2bTemplates.request(owner, req)
  return c.json({ templateID, buildID, names: [templateID], aliases: [templateID], tags: [], public: false }, 202)
}

/** Whether the files of a `copy()` are here already, and where to upload them (always: `forceUpload`). */
const fileUploadLink: Handler = async (c, owner) => {
  const hash = filesHash(c)
  const { e2bTemplates, auth } = c.var.services
  const present = e2bTemplates.files.has(owner, hash)
  const expires = Math.floor(Date.now() / 1000) + UPLOAD_URL_SECONDS
  const token = auth.token('upload', uploadId(owner, hash, expires))
  const query = new URLSearchParams({ owner, expires: String(expires), token })
  const url = `${new URL(c.req.url).origin}${UPLOAD_PATH}/${hash}?${query}`
  return c.json({ present, url }, 201)
}

const upload = async (c: Context<AppEnv>) => {
  const hash = filesHash(c)
  const { auth, config, e2bTemplates } = c.var.services
  const owner = c.req.query('owner') ?? ''
  const expires = Number(c.req.query('expires'))
  const token = c.req.query('token') ?? ''
  if (!(expires * 1000 > Date.now()) || !(await auth.verify('upload', uploadId(owner, hash, expires), owner, token)))
    throw new AppError('UNAUTHENTICATED', 'the upload URL is not valid (or has expired): build again')
  await e2bTemplates.files.put(owner, hash, uploadBody(c.req.raw, config.maxContextBytes, 'template files upload'))
  return c.body(null, 200)
}

const startBuild: Handler = async (c, owner) => {
  const req = await jsonBody(c, E2bBuildStart)
  await c.var.services.e2bTemplates.start(owner, param(c, 'templateID'), param(c, 'buildID'), req)
  // no body; the clients read one unless told its length is 0
  return c.body(null, 202, { 'content-length': '0' })
}

const buildStatus: Handler = async (c, owner) => {
  const offset = Math.max(0, Math.floor(Number(c.req.query('logsOffset')) || 0))
  const status = await c.var.services.e2bTemplates.status(owner, param(c, 'templateID'), param(c, 'buildID'), offset)
  return c.json(status, 200)
}

const aliasExists: Handler = async (c, owner) =>
  c.json(await c.var.services.e2bTemplates.alias(owner, param(c, 'alias')), 200)

export function registerTemplates(app: Hono<AppEnv>): void {
  app.post('/v3/templates', rest(requestBuild))
  app.get('/templates/aliases/:alias', rest(aliasExists))
  app.get('/templates/:templateID/files/:hash', rest(fileUploadLink))
  app.put(`${UPLOAD_PATH}/:hash`, upload)
  app.post('/v2/templates/:templateID/builds/:buildID', rest(startBuild))
  app.get('/templates/:templateID/builds/:buildID/status', rest(buildStatus))
}
