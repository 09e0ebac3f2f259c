// The HTTP app, the one edge of the control plane: request ids, then the route list (exposed
// ports and terminals, the E2B layer, forkbox's REST), each group behind its credentials and
// answering errors through the one builder (errors.ts). Upgrades come in through upgrade.ts.
import { randomBytes } from 'node:crypto'
import { AppError, FORKBOX_VERSION, NO_ROUTE_PREFIX, VERSION_HEADER } from '@forkbox/protocol'
import { OpenAPIHono } from '@hono/zod-openapi'
import { bodyLimit } from 'hono/body-limit'
import { cors } from 'hono/cors'
import { e2bApi } from '../e2b/index.ts'
import { EDGE_ROUTES, ROUTES } from '../routes/index.ts'
import { API_TAGS } from '../routes/tags.ts'
import { credentials } from './credentials.ts'
import { registerDashboard } from './dashboard.ts'
import { registerDocs } from './docs.ts'
import type { App, AppEnv, Services } from './env.ts'
import { errorResponse, validationError } from './errors.ts'
import { signedFileCors } from './signed-files.ts'
import { auditLog } from './tenancy.ts'

// the API's description holds no secrets: a client or a docs tool reads it without a key
const PUBLIC: ReadonlySet<string> = new Set(['/healthz', '/openapi.json'])

export function createApp(services: Services): App {
  const app: App = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error)
    },
  })
  app.onError((err, c) => errorResponse(c, err))
  // an SDK newer than this server knows the route: `noRoute` (and the message, for servers before
  // it) lets it say the server is too old instead of a bare 404
  app.notFound((c) =>
    errorResponse(c, new AppError('NOT_FOUND', `${NO_ROUTE_PREFIX}${c.req.method} ${c.req.path}`, { noRoute: true })),
  )

  app.use('*', async (c, next) => {
    const requestId = `req_${randomBytes(8).toString('hex')}`
    c.set('requestId', requestId)
    c.set('services', services)
    const started = performance.now()
    await next()
    c.header('X-Request-Id', requestId)
    c.header(VERSION_HEADER, FORKBOX_VERSION)
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
  app.use('*', auditLog())
  for (const r of EDGE_ROUTES) r.register(app)
  // pages on the allow-listed origins may call the API (the SDK's browser build); none by default
  const { corsOrigins } = services.config
  if (corsOrigins.length > 0) {
    app.use(
      '*',
      cors({
        origin: corsOrigins,
        allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
        allowHeaders: ['authorization', 'content-type', 'x-api-key', 'idempotency-key'],
        exposeHeaders: ['X-Request-Id', VERSION_HEADER, 'Retry-After'],
        maxAge: 600,
      }),
    )
  }
  // the API reference page, public as /openapi.json is; the dashboard's page and assets
  registerDocs(app)
  registerDashboard(app)
  // the E2B API (docs/e2b.md), with its own credential sources and error shapes
  app.route('/', e2bApi(services.config))
  // a signed file URL stands in for the key on the one request it was made for
  app.use('*', signedFileCors)
  const apiKey = credentials('fileSignature', 'apiKey')
  app.use('*', async (c, next) => (PUBLIC.has(c.req.path) ? next() : apiKey(c, next)))
  const jsonLimit = bodyLimit({
    maxSize: services.config.maxJsonBodyBytes,
    onError: () => {
      throw new AppError('PAYLOAD_TOO_LARGE', `request body is larger than ${services.config.maxJsonBodyBytes} bytes`)
    },
  })
  app.use('*', async (c, next) =>
    c.req.method === 'PUT' && c.req.path.endsWith('/files') ? next() : jsonLimit(c, next),
  )

  // a JSON content type on an empty body (`curl -H`, clients that send it on every request) is no
  // body: a route whose body is optional takes its defaults instead of refusing malformed JSON
  app.use('*', async (c, next) => {
    const raw = c.req.raw
    const empty = raw.body === null || raw.headers.get('content-length') === '0'
    if (empty && /json/i.test(raw.headers.get('content-type') ?? '')) {
      const headers = new Headers(raw.headers)
      headers.delete('content-type')
      c.req.raw = new Request(raw.url, { method: raw.method, headers, signal: raw.signal })
    }
    await next()
  })

  app.openAPIRegistry.registerComponent('securitySchemes', 'apiKey', { type: 'http', scheme: 'bearer' })
  for (const r of ROUTES) r.register(app)
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: { title: 'forkbox', version: FORKBOX_VERSION, description: 'Sandboxes for AI-generated code, on gVisor.' },
    tags: [...API_TAGS],
  })
  return app
}
