// The URL a `copy()`'s files are uploaded to: on forkbox itself, outside the API-key routes,
// authorized by its own token (whose files, which hash, until when).
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import { z } from 'zod'
import type { AppEnv } from '../../http/env.ts'

/** Where the clients PUT a `copy()`'s files: outside the API-key routes, authorized by the URL's token. */
export const UPLOAD_PATH = '/e2b-uploads'
/** How long an upload URL is good for (the clients use it at once). */
export const UPLOAD_URL_SECONDS = 3600

const FilesHash = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'a files hash is 1-128 of A-Z, a-z, 0-9, _ and -')

/** The `:hash` of the path, checked. */
export function filesHash(c: Context<AppEnv>): string {
  const parsed = FilesHash.safeParse(c.req.param('hash') as string)
  if (!parsed.success) throw new AppError('VALIDATION_FAILED', parsed.error.issues[0]?.message ?? 'bad files hash')
  return parsed.data
}

/** What an upload URL's token is made for. */
export const uploadId = (owner: string, hash: string, expires: number) => `${owner}:${hash}:${expires}`
