// The E2B compatibility layer: what the published `e2b` and `@e2b/code-interpreter` clients
// call (control plane, envd, code interpreter), translated to forkbox's services. Each group of
// its routes says where its credential comes from and which error shape its clients read; the
// routes are one module per operation, registered here in the order they are matched.
import { AppError } from '@forkbox/protocol'
import { Hono, type MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { ServerConfig } from '../config.ts'
import { type CredentialSource, credentials } from '../http/credentials.ts'
import type { AppEnv, ErrorFormat } from '../http/env.ts'
import { connectErrors, e2bRestErrors } from './errors.ts'
import * as filesRead from './files/read.ts'
import * as filesWrite from './files/write.ts'
import * as createWatcher from './filesystem/create-watcher.ts'
import * as getWatcherEvents from './filesystem/get-watcher-events.ts'
import * as listDir from './filesystem/list-dir.ts'
import * as makeDir from './filesystem/make-dir.ts'
import * as move from './filesystem/move.ts'
import * as remove from './filesystem/remove.ts'
import * as removeWatcher from './filesystem/remove-watcher.ts'
import * as stat from './filesystem/stat.ts'
import * as watchDir from './filesystem/watch-dir.ts'
import { Watchers } from './filesystem/watchers.ts'
import * as health from './health.ts'
import * as contextCreate from './interpreter/context-create.ts'
import * as contextList from './interpreter/context-list.ts'
import * as contextRemove from './interpreter/context-remove.ts'
import * as contextRestart from './interpreter/context-restart.ts'
import * as execute from './interpreter/execute.ts'
import * as notServed from './not-served.ts'
import * as processCloseStdin from './process/close-stdin.ts'
import * as processConnect from './process/connect.ts'
import * as processList from './process/list.ts'
import * as processSendInput from './process/send-input.ts'
import * as processSendSignal from './process/send-signal.ts'
import * as processStart from './process/start.ts'
import { Started } from './process/started.ts'
import * as processStreamInput from './process/stream-input.ts'
import * as processUpdate from './process/update.ts'
import type { E2bLayer, E2bRouteModule } from './route-module.ts'
import * as sandboxConnect from './sandboxes/connect.ts'
import * as sandboxCreate from './sandboxes/create.ts'
import * as sandboxFork from './sandboxes/fork.ts'
import * as sandboxGet from './sandboxes/get.ts'
import * as sandboxKill from './sandboxes/kill.ts'
import * as sandboxList from './sandboxes/list.ts'
import * as sandboxListV2 from './sandboxes/list-v2.ts'
import * as sandboxMetrics from './sandboxes/metrics.ts'
import * as sandboxNetwork from './sandboxes/network.ts'
import * as sandboxPause from './sandboxes/pause.ts'
import * as sandboxTimeout from './sandboxes/timeout.ts'
import { e2bWrites } from './scopes.ts'
import { e2bFileSignature } from './signature.ts'
import * as snapshotCreate from './snapshots/create.ts'
import * as snapshotList from './snapshots/list.ts'
import * as templateAlias from './templates/alias.ts'
import * as templateBuildStatus from './templates/build-status.ts'
import * as templateDelete from './templates/delete.ts'
import * as templateFileUploadLink from './templates/file-upload-link.ts'
import * as templateRequestBuild from './templates/request-build.ts'
import * as templateStartBuild from './templates/start-build.ts'
import * as templateUpload from './templates/upload.ts'
import { UPLOAD_PATH } from './templates/upload-url.ts'

/** The E2B routes in the order they are matched (`DELETE /templates/tags` is a template's delete). */
const E2B_ROUTES: readonly E2bRouteModule[] = [
  // the template builder (api.e2b.app)
  templateRequestBuild,
  templateAlias,
  templateFileUploadLink,
  templateUpload,
  templateStartBuild,
  templateBuildStatus,
  // the control plane (api.e2b.app)
  sandboxCreate,
  sandboxListV2,
  sandboxList,
  sandboxGet,
  sandboxKill,
  sandboxConnect,
  sandboxTimeout,
  sandboxPause,
  sandboxFork,
  snapshotCreate,
  snapshotList,
  templateDelete,
  sandboxNetwork,
  sandboxMetrics,
  notServed,
  // envd's process.Process
  processStart,
  processConnect,
  processList,
  processSendInput,
  processSendSignal,
  processCloseStdin,
  processUpdate,
  processStreamInput,
  // envd's filesystem.Filesystem
  stat,
  makeDir,
  move,
  listDir,
  remove,
  watchDir,
  createWatcher,
  getWatcherEvents,
  removeWatcher,
  // envd's REST side
  filesRead,
  filesWrite,
  health,
  // the code interpreter (port 49999)
  execute,
  contextCreate,
  contextList,
  contextRestart,
  contextRemove,
]

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
  // a template file upload carries no key: its URL's token says whose and which (e2b/templates/upload.ts)
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
  const layer: E2bLayer = {
    maxUploadBytes: config.maxUploadBytes,
    processes: new Started(),
    watchers: new Watchers(),
  }
  for (const r of E2B_ROUTES) r.register(app, layer)
  return app
}
