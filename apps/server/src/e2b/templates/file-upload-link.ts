// GET /templates/{templateID}/files/{hash}: whether the files of a `copy()` are here already, and
// where to upload them (always: the clients honour `forceUpload`).
import { withApiKey } from '../auth.ts'
import type { E2bApp } from '../route-module.ts'
import { filesHash, UPLOAD_PATH, UPLOAD_URL_SECONDS, uploadId } from './upload-url.ts'

export function register(app: E2bApp): void {
  app.get(
    '/templates/:templateID/files/:hash',
    withApiKey(async (c, owner) => {
      const hash = filesHash(c)
      const { e2bTemplates, auth } = c.var.services
      const present = e2bTemplates.files.has(owner, hash)
      const expires = Math.floor(Date.now() / 1000) + UPLOAD_URL_SECONDS
      const token = auth.token('upload', uploadId(owner, hash, expires))
      const query = new URLSearchParams({ owner, expires: String(expires), token })
      const url = `${new URL(c.req.url).origin}${UPLOAD_PATH}/${hash}?${query}`
      return c.json({ present, url }, 201)
    }),
  )
}
