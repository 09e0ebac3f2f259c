// PUT /e2b-uploads/{hash}: a `copy()`'s files (a tar or tar.gz), stored for the build that takes
// them; no key, the URL's token says whose and which.
import { AppError } from '@forkbox/protocol'
import { uploadBody } from '../../http/upload.ts'
import type { E2bApp } from '../route-module.ts'
import { filesHash, UPLOAD_PATH, uploadId } from './upload-url.ts'

export function register(app: E2bApp): void {
  app.put(`${UPLOAD_PATH}/:hash`, async (c) => {
    const hash = filesHash(c)
    const { auth, config, e2bTemplates } = c.var.services
    const owner = c.req.query('owner') ?? ''
    const expires = Number(c.req.query('expires'))
    const token = c.req.query('token') ?? ''
    if (!(expires * 1000 > Date.now()) || !(await auth.verify('upload', uploadId(owner, hash, expires), owner, token)))
      throw new AppError('UNAUTHENTICATED', 'the upload URL is not valid (or has expired): build again')
    await e2bTemplates.files.put(owner, hash, uploadBody(c.req.raw, config.maxContextBytes, 'template files upload'))
    return c.body(null, 200)
  })
}
