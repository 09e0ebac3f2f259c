// The HTTP app: request ids, body limits, auth, then one file per operation under routes/.
import { randomBytes } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import { OpenAPIHono } from '@hono/zod-openapi'
import { bodyLimit } from 'hono/body-limit'
import { e2bApi } from '../e2b/index.ts'
import * as codeContextCreate from '../routes/code/context-create.ts'
import * as codeContextList from '../routes/code/context-list.ts'
import * as codeContextRemove from '../routes/code/context-remove.ts'
import * as codeContextRestart from '../routes/code/context-restart.ts'
import * as codeRun from '../routes/code/run.ts'
import * as events from '../routes/events.ts'
import * as filesList from '../routes/files/list.ts'
import * as filesMkdir from '../routes/files/mkdir.ts'
import * as filesRead from '../routes/files/read.ts'
import * as filesRemove from '../routes/files/remove.ts'
import * as filesRename from '../routes/files/rename.ts'
import * as filesStat from '../routes/files/stat.ts'
import * as filesWrite from '../routes/files/write.ts'
import * as health from '../routes/health.ts'
import * as keysCreate from '../routes/keys/create.ts'
import * as keysList from '../routes/keys/list.ts'
import * as keysRevoke from '../routes/keys/revoke.ts'
import * as metrics from '../routes/metrics.ts'
import * as processList from '../routes/processes/list.ts'
import * as processOutput from '../routes/processes/output.ts'
import * as processSignal from '../routes/processes/signal.ts'
import * as processStdin from '../routes/processes/stdin.ts'
import * as processWait from '../routes/processes/wait.ts'
import * as sandboxCreate from '../routes/sandboxes/create.ts'
import * as sandboxEvents from '../routes/sandboxes/events.ts'
import * as sandboxExec from '../routes/sandboxes/exec.ts'
import * as sandboxFork from '../routes/sandboxes/fork.ts'
import * as sandboxGet from '../routes/sandboxes/get.ts'
import * as sandboxHibernate from '../routes/sandboxes/hibernate.ts'
import * as sandboxKill from '../routes/sandboxes/kill.ts'
import * as sandboxList from '../routes/sandboxes/list.ts'
import * as sandboxMetrics from '../routes/sandboxes/metrics.ts'
import * as sandboxNetwork from '../routes/sandboxes/network.ts'
import * as sandboxTimeout from '../routes/sandboxes/timeout.ts'
import * as snapshotCreate from '../routes/snapshots/create.ts'
import * as snapshotDelete from '../routes/snapshots/delete.ts'
import * as snapshotList from '../routes/snapshots/list.ts'
import * as templates from '../routes/templates.ts'
import { apiKeyIn } from './auth.ts'
import type { App, AppEnv, Services } from './env.ts'
import { errorResponse, validationError } from './errors.ts'

const PUBLIC = new Set(['/healthz'])

export function createApp(services: Services): App {
  const app: App = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error)
    },
  })
  app.onError((err, c) => errorResponse(c, err))
  app.notFound((c) => errorResponse(c, new AppError('NOT_FOUND', `no route ${c.req.method} ${c.req.path}`)))

  app.use('*', async (c, next) => {
    const requestId = `req_${randomBytes(8).toString('hex')}`
    c.set('requestId', requestId)
    c.set('services', services)
    const started = performance.now()
    await next()
    c.header('X-Request-Id', requestId)
    services.log.info(
      {
        requestId,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
      },
      'request',
    )
  })
  // the E2B API (docs/e2b.md), with its own auth and error shapes
  app.route('/', e2bApi(services.config))
  app.use('*', async (c, next) => {
    if (PUBLIC.has(c.req.path)) return next()
    c.set('principal', services.auth.require(apiKeyIn((name) => c.req.header(name))))
    return next()
  })
  const jsonLimit = bodyLimit({
    maxSize: services.config.maxJsonBodyBytes,
    onError: () => {
      throw new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${services.config.maxJsonBodyBytes} bytes`)
    },
  })
  app.use('*', async (c, next) =>
    c.req.method === 'PUT' && c.req.path.endsWith('/files') ? next() : jsonLimit(c, next),
  )

  app.openAPIRegistry.registerComponent('securitySchemes', 'apiKey', { type: 'http', scheme: 'bearer' })
  for (const r of [
    health,
    templates,
    sandboxCreate,
    sandboxList,
    sandboxGet,
    sandboxKill,
    sandboxTimeout,
    sandboxNetwork,
    sandboxExec,
    processList,
    processOutput,
    processWait,
    processStdin,
    processSignal,
    sandboxEvents,
    events,
    metrics,
    sandboxMetrics,
    sandboxFork,
    sandboxHibernate,
    snapshotCreate,
    snapshotList,
    snapshotDelete,
    codeRun,
    codeContextCreate,
    codeContextList,
    codeContextRestart,
    codeContextRemove,
    filesList,
    filesStat,
    filesMkdir,
    filesRename,
    filesRead,
    filesWrite,
    filesRemove,
    keysCreate,
    keysList,
    keysRevoke,
  ])
    r.register(app)
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: { title: 'forkbox', version: '0.1.0', description: 'Sandboxes for AI-generated code, on gVisor.' },
  })
  return app
}
