// Terminals over WebSocket at /v1/sandboxes/{id}/pty. The client sends one JSON `start`
// ({cols, rows, cmd?, argv?, cwd?, envs?, user?}), then binary frames of input and JSON
// `resize` ({cols, rows}) / `kill` ({signal}); the server sends binary frames of output, JSON
// `started` ({pid}) and, at the end, `exit` ({exitCode, signal}), then closes. The key comes in
// the Authorization / X-API-Key header or, for browsers, `?key=`. Closing the socket hangs up
// (SIGHUP) the program. Output is flow controlled: the program waits while the socket is slow.
import { AppError, EnvVars, SIGNALS } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { Context } from 'hono'
import { type RawData, type WebSocket, WebSocketServer } from 'ws'
import { z } from 'zod'
import { credentials } from '../../http/credentials.ts'
import type { App, AppEnv } from '../../http/env.ts'
import { errorBody } from '../../http/errors.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { TAKEN_OVER } from '../../http/upgrade.ts'
import { parseOrThrow } from '../../http/validate.ts'
import { tagged } from '../tags.ts'

const START_TIMEOUT_MS = 10_000

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/pty',
  tags: tagged('Terminals'),
  summary: 'Open a terminal: a WebSocket (start, then input/resize/kill; output, started, exit)',
  security,
  request: { params: SandboxIdParam },
  responses: { 101: { description: 'Switching to the WebSocket protocol' }, ...errorResponses },
})

const PtyId = z.object({ id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/) })

const Start = z.object({
  type: z.literal('start'),
  cols: z.number().int().min(1).max(1000).default(80),
  rows: z.number().int().min(1).max(1000).default(24),
  cmd: z
    .string()
    .max(128 * 1024)
    .optional(),
  argv: z.array(z.string()).max(4096).optional(),
  cwd: z.string().max(4096).optional(),
  envs: EnvVars.optional(),
  user: z.string().max(32).optional(),
})
const Control = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('resize'),
    cols: z.number().int().min(1).max(1000),
    rows: z.number().int().min(1).max(1000),
  }),
  z.object({ type: z.literal('kill'), signal: z.enum(SIGNALS).default('SIGKILL') }),
])

/** A client's text message as JSON; undefined when it is not JSON (never throws). */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function sendJson(ws: WebSocket, msg: unknown): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg))
}

export function register(app: App): void {
  app.openAPIRegistry.registerPath(route)
  // one per app: the sockets it upgrades are this app's
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 })
  // browsers cannot set headers on a WebSocket: `?key=` is accepted here (and only here)
  app.get('/v1/sandboxes/:id/pty', credentials('apiKey', 'apiKeyQuery'), (c) => {
    const { id } = parseOrThrow(PtyId, c.req.param())
    const upgrade = c.env?.upgrade
    const incoming = c.env?.incoming
    if (!upgrade || !incoming || c.req.header('upgrade')?.toLowerCase() !== 'websocket')
      throw new AppError('NOT_FOUND', `${route.path} is a WebSocket endpoint: connect with Upgrade: websocket`)
    const owner = c.var.principal.keyId
    wss.handleUpgrade(incoming, upgrade.socket, upgrade.head, (ws) => serve(c, ws, owner, id))
    return TAKEN_OVER
  })
}

function serve(c: Context<AppEnv>, ws: WebSocket, owner: string, sandboxId: string): void {
  const { exec, log } = c.var.services
  /** A terminal's errors are forkbox's error body (with the request id) in an `error` message. */
  const error = (err: unknown) => sendJson(ws, { type: 'error', ...errorBody(c, err) })
  const fail = (err: unknown) => {
    error(err)
    ws.close(1011)
  }
  const timer = setTimeout(() => fail(new AppError('VALIDATION_FAILED', 'no start message')), START_TIMEOUT_MS)
  ws.once('message', (data: RawData, isBinary: boolean) => {
    clearTimeout(timer)
    let start: z.infer<typeof Start>
    try {
      if (isBinary) throw new Error('binary')
      start = Start.parse(parseJson(data.toString()))
    } catch {
      return fail(new AppError('VALIDATION_FAILED', 'the first message must be {"type":"start", cols, rows, ...}'))
    }
    const onData = (chunk: Uint8Array) =>
      new Promise<void>((resolve) => {
        if (ws.readyState !== ws.OPEN) return resolve()
        ws.send(chunk, { binary: true }, () => resolve())
      })
    exec
      .openPty(
        owner,
        sandboxId,
        {
          argv: start.argv,
          cmd: start.cmd,
          cols: start.cols,
          rows: start.rows,
          env: start.envs,
          cwd: start.cwd,
          user: start.user,
        },
        onData,
        (session) => {
          session.pid.then((pid) => sendJson(ws, { type: 'started', pid })).catch(() => {})
          ws.on('message', (msg: RawData, binary: boolean) => {
            if (binary) return session.write(msg as Buffer)
            const parsed = Control.safeParse(parseJson(msg.toString()))
            if (!parsed.success)
              return error(new AppError('VALIDATION_FAILED', 'a text message must be {"type":"resize"|"kill", ...}'))
            if (parsed.data.type === 'resize') session.resize(parsed.data.cols, parsed.data.rows)
            else session.kill(parsed.data.signal)
          })
          ws.on('close', () => session.kill('SIGHUP'))
        },
      )
      .then((exit) => {
        sendJson(ws, { type: 'exit', ...exit })
        ws.close(1000)
      })
      .catch(fail)
  })
  ws.on('error', (err) => log.warn({ err: String(err), sandboxId }, 'terminal socket error'))
}
