// envd's REST side: GET /files (raw bytes), POST /files (multipart, or octet-stream with
// optional gzip) and GET /health (204 running, 502 not: what `isRunning()` reads).
import { Readable } from 'node:stream'
import type { ReadableStream as NodeReadableStream } from 'node:stream/web'
import { createGunzip } from 'node:zlib'
import { AppError, type FileEntry } from '@forkbox/protocol'
import type { Context, Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { AppEnv } from '../http/env.ts'
import { pathOf } from './filesystem.ts'
import { type SandboxCall, sandboxCall } from './sandbox-call.ts'

/** `?username=` wins over the Basic auth user, as in envd. */
function userOf(c: Context<AppEnv>, call: SandboxCall): string | undefined {
  return c.req.query('username') || call.user
}

const written = (e: FileEntry) => ({ name: e.name, type: 'file', path: e.path })

async function read(c: Context<AppEnv>): Promise<Response> {
  const call = sandboxCall(c)
  const path = pathOf(c.req.query('path'))
  const file = await call.services.sandboxes.readFile(call.owner, call.sandboxId, path, userOf(c, call))
  return new Response(file.stream, {
    headers: {
      'content-type': 'application/octet-stream',
      ...(file.size === null ? {} : { 'content-length': String(file.size) }),
      'content-disposition': `attachment; filename="${encodeURIComponent(path.split('/').pop() ?? 'file')}"`,
    },
  })
}

async function write(c: Context<AppEnv>): Promise<Response> {
  const call = sandboxCall(c)
  const user = userOf(c, call)
  const queryPath = c.req.query('path')
  const put = (path: string, body: AsyncIterable<Uint8Array>) =>
    call.services.sandboxes.writeFile(call.owner, call.sandboxId, pathOf(path), body, { user })
  const type = c.req.header('content-type') ?? ''
  if (type.startsWith('multipart/form-data')) {
    const form = await c.req.raw.formData()
    const files = form.getAll('file').filter((f): f is File => typeof f !== 'string')
    if (files.length === 0) throw new AppError('VALIDATION_FAILED', 'no `file` part in the upload')
    const out: ReturnType<typeof written>[] = []
    // one file: the path query names it; several: each part's filename is its path
    for (const f of files)
      out.push(
        written(
          await put(
            files.length === 1 && queryPath ? queryPath : f.name,
            Readable.fromWeb(f.stream() as NodeReadableStream),
          ),
        ),
      )
    return c.json(out, 200)
  }
  if (!queryPath) throw new AppError('INVALID_PATH', 'path: required for an octet-stream upload')
  const raw = c.req.raw.body ? Readable.fromWeb(c.req.raw.body as NodeReadableStream) : Readable.from([])
  const encoding = c.req.header('content-encoding')
  if (encoding && encoding !== 'gzip' && encoding !== 'identity')
    throw new AppError('VALIDATION_FAILED', `unsupported Content-Encoding ${encoding}`)
  const body = encoding === 'gzip' ? raw.pipe(createGunzip()) : raw
  return c.json([written(await put(queryPath, body))], 200)
}

/** 204 running; 502 for anything else, an unknown sandbox included (what E2B's proxy answers). */
async function health(c: Context<AppEnv>): Promise<Response> {
  const call = sandboxCall(c)
  try {
    const s = call.services.sandboxes.get(call.owner, call.sandboxId)
    return s.state === 'running' ? c.body(null, 204) : c.text(`sandbox ${s.id} is ${s.state}`, 502)
  } catch (err) {
    if (err instanceof AppError && err.code === 'SANDBOX_NOT_FOUND') return c.text(err.message, 502)
    throw err
  }
}

export function registerFiles(app: Hono<AppEnv>, maxUploadBytes: number): void {
  const limit = bodyLimit({
    maxSize: maxUploadBytes,
    onError: () => {
      throw new AppError('PAYLOAD_TOO_LARGE', `upload is larger than ${maxUploadBytes} bytes`)
    },
  })
  app.get('/files', read)
  app.post('/files', limit, write)
  app.get('/health', health)
}
