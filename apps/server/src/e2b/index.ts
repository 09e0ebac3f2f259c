// The E2B compatibility layer: what the published `e2b` and `@e2b/code-interpreter` clients
// call (control plane, envd, code interpreter), translated to forkbox's services. Each group of
// its routes says where its credential comes from and which error shape its clients read.
import { AppError } from '@forkbox/protocol'
import { Hono, type MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { ServerConfig } from '../config.ts'
import { type CredentialSource, credentials } from '../http/credentials.ts'
import type { AppEnv } from '../http/env.ts'
import type { ErrorFormat } from '../http/errors.ts'
import { registerControlPlane } from './control-plane.ts'
import { connectErrors, e2bRestErrors } from './errors.ts'
import { registerFiles } from './files.ts'
import { registerFilesystem } from './filesystem.ts'
import { registerInterpreter } from './interpreter.ts'
import { registerProcess } from './process.ts'
import { e2bWrites } from './scopes.ts'
import { e2bFileSignature } from './signature.ts'
import { registerTemplates, UPLOAD_PATH } from './templates.ts'

/** The control plane (api.e2b.app): the API key, E2B's REST error shape. */
const CONTROL_PLANE = ['/sandboxes', '/sandboxes/*', '/v2/*', '/v3/*', '/snapshots', '/templates', '/templates/*']
/** envd's Connect services: the sandbox's access token (or its owner's key), Connect errors. */
const ENVD_CONNECT = ['/process.Process/*', '/filesystem.Filesystem/*']
/** envd's REST side and the code interpreter: the access token (or the key), REST errors. */
const ENVD_REST = ['/files', '/health', '/execute', '/contexts', '/contexts/*']
const SANDBOX_CALL: CredentialSource[] = ['accessToken', 'apiKey']
/** envd's /files also takes a signed URL (e2b/signature.ts) in place of the token. */
const FILES_CALL: CredentialSource[] = [e2bFileSignature, ...SANDBOX_CALL]

const errorFormat =
  (format: ErrorFormat): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    c.set('errorFormat', format)
    // what a read-only key (and its sandboxes' tokens) may call: Connect methods by name
    c.set('writes', e2bWrites)
    await next()
  }

/** Mounted at `/` before forkbox's own routes; none of its paths is one of forkbox's (`/v1/...`). */
export function e2bApi(config: Pick<ServerConfig, 'maxJsonBodyBytes' | 'maxUploadBytes'>): Hono<AppEnv> {
  const app = new Hono<AppEnv>()
  const group = (paths: string[], format: ErrorFormat, sources: CredentialSource[]) => {
    for (const path of paths) app.use(path, errorFormat(format), credentials(...sources))
  }
  group(CONTROL_PLANE, e2bRestErrors, ['apiKey'])
  group(ENVD_CONNECT, connectErrors, SANDBOX_CALL)
  group(['/files'], e2bRestErrors, FILES_CALL)
  group(
    ENVD_REST.filter((p) => p !== '/files'),
    e2bRestErrors,
    SANDBOX_CALL,
  )
  app.use('/volumes/*', errorFormat(e2bRestErrors), credentials('apiKey'))
  // a template file upload carries no key: its URL's token says whose and which (e2b/templates.ts)
  app.use(`${UPLOAD_PATH}/*`, errorFormat(e2bRestErrors))
  const jsonLimit = bodyLimit({
    maxSize: config.maxJsonBodyBytes,
    onError: () => {
      throw new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${config.maxJsonBodyBytes} bytes`)
    },
  })
  // not /files: an upload is capped as it streams (http/upload.ts)
  for (const path of [...CONTROL_PLANE, ...ENVD_CONNECT, '/execute', '/contexts', '/contexts/*'])
    app.use(path, jsonLimit)
  registerTemplates(app)
  registerControlPlane(app)
  registerProcess(app)
  registerFilesystem(app)
  registerFiles(app, config.maxUploadBytes)
  registerInterpreter(app)
  return app
}
