// The HTTP app: request ids, body limits, auth, then one file per operation under routes/.
import { randomBytes } from 'node:crypto'
import { AppError } from '@forkbox/protocol'
import { OpenAPIHono } from '@hono/zod-openapi'
import { bodyLimit } from 'hono/body-limit'
import { e2bApi } from '../e2b/index.ts'
import { ROUTES } from '../routes/index.ts'
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
  for (const r of ROUTES) r.register(app)
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: { title: 'forkbox', version: '0.1.0', description: 'Sandboxes for AI-generated code, on gVisor.' },
  })
  return app
}
