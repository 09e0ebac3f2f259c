// envd's REST side: GET /files (raw bytes), POST /files (multipart, or octet-stream with
// optional gzip; either streamed to the sandbox as it arrives) and GET /health (204 running,
// 502 not: what `isRunning()` reads).
import { pipeline, type Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { AppError, type FileEntry } from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import type { AppEnv } from '../http/env.ts'
import { metadataOf } from '../http/file-metadata.ts'
import { bodyError, capped, eachFilePart, uploadBody } from '../http/upload.ts'
import { pathOf } from './filesystem.ts'
import { type SandboxCall, sandboxCall } from './sandbox-call.ts'

/** `?username=` wins over the Basic auth user, as in envd. */
function userOf(c: Context<AppEnv>, call: SandboxCall): string | undefined {
  return c.req.query('username') || call.user
}

const written = (e: FileEntry) => ({
  name: e.name,
  type: 'file',
  path: e.path,
  ...(e.metadata ? { metadata: e.metadata } : {}),
})

async function read(c: Context<AppEnv>): Promise<Response> {
  const call = await sandboxCall(c)
  const path = pathOf(c.req.query('path'))
  const file = await call.services.calls.readFile(call.owner, call.sandboxId, path, userOf(c, call))
  return new Response(file.stream, {
    headers: {
      'content-type': 'application/octet-stream',
      ...(file.size === null ? {} : { 'content-length': String(file.size) }),
      'content-disposition': `attachment; filename="${encodeURIComponent(path.split('/').pop() ?? 'file')}"`,
    },
  })
}

/** Most files in one multipart upload (the clients send one part per file). */
const MAX_UPLOAD_FILES = 1000

/**
 * The request body as it arrives: at most `maxBytes` on the wire, gunzipped if so encoded (and
 * at most `maxBytes` after that too). Nothing is buffered beyond the streams' own windows.
 */
function bodyOf(c: Context<AppEnv>, maxBytes: number): Readable {
  const encoding = c.req.header('content-encoding')
  if (encoding && encoding !== 'gzip' && encoding !== 'identity')
    throw new AppError('VALIDATION_FAILED', `unsupported Content-Encoding ${encoding}`)
  const raw = uploadBody(c.req.raw, maxBytes)
  if (encoding !== 'gzip') return raw
  // the callback form hands back the last stream; an error anywhere destroys them all and reaches it
  return pipeline(raw, createGunzip(), capped(maxBytes, 'decompressed upload'), () => {})
}

async function write(c: Context<AppEnv>, maxBytes: number): Promise<Response> {
  const call = await sandboxCall(c)
  const user = userOf(c, call)
  const queryPath = c.req.query('path')
  const metadata = metadataOf(c)
  // a signed URL writes the one path it was signed for
  const signed = c.var.caller.kind === 'token' && c.var.caller.from === 'query'
  const put = (path: string, body: AsyncIterable<Uint8Array>) => {
    if (signed && pathOf(path) !== pathOf(queryPath))
      throw new AppError('PERMISSION_DENIED', `the signed URL is for ${queryPath ?? 'no path'}, not ${path}`)
    return call.services.calls.writeFile(call.owner, call.sandboxId, pathOf(path), body, { user, metadata })
  }
  const type = c.req.header('content-type') ?? ''
  if (type.startsWith('multipart/form-data')) {
    const files = await eachFilePart(
      bodyOf(c, maxBytes),
      { contentType: type, maxFileBytes: maxBytes, maxFiles: MAX_UPLOAD_FILES, firstPath: queryPath },
      async (path, data) => written(await put(path, data)),
    )
    return c.json(files, 200)
  }
  if (!queryPath) throw new AppError('INVALID_PATH', 'path: required for an octet-stream upload')
  const body = bodyOf(c, maxBytes)
  try {
    return c.json([written(await put(queryPath, body))], 200)
  } catch (err) {
    body.destroy()
    throw bodyError(err) ?? err
  }
}

/** 204 running; 502 for anything else, an unknown sandbox included (what E2B's proxy answers). */
async function health(c: Context<AppEnv>): Promise<Response> {
  const call = await sandboxCall(c)
  try {
    const s = await call.services.sandboxes.get(call.owner, call.sandboxId)
    return s.state === 'running' ? c.body(null, 204) : c.text(`sandbox ${s.id} is ${s.state}`, 502)
  } catch (err) {
    if (err instanceof AppError && err.code === 'SANDBOX_NOT_FOUND') return c.text(err.message, 502)
    throw err
  }
}

export function registerFiles(app: Hono<AppEnv>, maxUploadBytes: number): void {
  app.get('/files', read)
  // no body-limit middleware: hono's reads a body without Content-Length whole into memory
  app.post('/files', (c) => write(c, maxUploadBytes))
  app.get('/health', health)
}
