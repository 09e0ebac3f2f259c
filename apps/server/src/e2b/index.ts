// The E2B compatibility layer: what the published `e2b` and `@e2b/code-interpreter` clients
// call (control plane, envd, code interpreter), translated to forkbox's services. Its routes
// do their own auth (API key, or a sandbox's access token) and answer errors E2B-shaped.
import { AppError } from '@forkbox/protocol'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { ServerConfig } from '../config.ts'
import type { AppEnv } from '../http/env.ts'
import { registerControlPlane } from './control-plane.ts'
import { restError } from './errors.ts'
import { registerFiles } from './files.ts'
import { registerFilesystem } from './filesystem.ts'
import { registerInterpreter } from './interpreter.ts'
import { registerProcess } from './process.ts'

/** Mounted at `/` before forkbox's auth; none of its paths is one of forkbox's (`/v1/...`). */
export function e2bApi(config: Pick<ServerConfig, 'maxJsonBodyBytes' | 'maxUploadBytes'>): Hono<AppEnv> {
  const app = new Hono<AppEnv>()
  app.onError((err, c) => restError(c, err))
  const jsonLimit = bodyLimit({
    maxSize: config.maxJsonBodyBytes,
    onError: () => {
      throw new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${config.maxJsonBodyBytes} bytes`)
    },
  })
  for (const path of ['/sandboxes', '/sandboxes/*', '/v2/*', '/process.Process/*', '/filesystem.Filesystem/*'])
    app.use(path, jsonLimit)
  for (const path of ['/execute', '/contexts', '/contexts/*']) app.use(path, jsonLimit)
  registerControlPlane(app)
  registerProcess(app)
  registerFilesystem(app)
  registerFiles(app, config.maxUploadBytes)
  registerInterpreter(app)
  return app
}
