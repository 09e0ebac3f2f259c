// POST /files: multipart (one part a file), or octet-stream with optional gzip; either streamed to
// the sandbox as it arrives. A signed URL writes the one path it was signed for.
import { pipeline, type Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { AppError, type FileEntry } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'
import { metadataOf } from '../../http/file-metadata.ts'
import { bodyError, capped, eachFilePart, uploadBody } from '../../http/upload.ts'
import type { E2bApp, E2bLayer } from '../route-module.ts'
import { sandboxCall } from '../sandbox-call.ts'
import { pathOf, userOf } from './query.ts'

/** Most files in one multipart upload (the clients send one part per file). */
const MAX_UPLOAD_FILES = 1000

const written = (e: FileEntry) => ({
  name: e.name,
  type: 'file',
  path: e.path,
  ...(e.metadata ? { metadata: e.metadata } : {}),
})

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
    return call.services.files.writeFile(call.owner, call.sandboxId, pathOf(path), body, { user, metadata })
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

export function register(app: E2bApp, { maxUploadBytes }: E2bLayer): void {
  // no body-limit middleware: hono's reads a body without Content-Length whole into memory
  app.post('/files', (c) => write(c, maxUploadBytes))
}
