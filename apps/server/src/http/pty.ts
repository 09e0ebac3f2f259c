// Terminals over WebSocket at /v1/sandboxes/{id}/pty. The client sends one JSON `start`
// ({cols, rows, cmd?, argv?, cwd?, envs?, user?}), then binary frames of input and JSON
// `resize` ({cols, rows}) / `kill` ({signal}); the server sends binary frames of output, JSON
// `started` ({pid}) and, at the end, `exit` ({exitCode, signal}), then closes. The key comes in
// the Authorization / X-API-Key header or, for browsers, `?key=`. Closing the socket hangs up
// (SIGHUP) the program. Output is flow controlled: the program waits while the socket is slow.
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { AppError, EnvVars, SIGNALS } from '@forkbox/protocol'
import type { Logger } from 'pino'
import { type RawData, type WebSocket, WebSocketServer } from 'ws'
import { z } from 'zod'
import type { ExecService } from '../services/exec.ts'
import { type Authenticator, apiKeyIn } from './auth.ts'

const PATH = /^\/v1\/sandboxes\/([A-Za-z0-9_-]{1,64})\/pty$/
const START_TIMEOUT_MS = 10_000

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

function refuse(socket: Duplex, status: number, message: string): void {
  socket.end(`HTTP/1.1 ${status} ${message}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
}

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

/** Returns the `upgrade` handler: true when the request was a terminal request (handled). */
export function ptyUpgrade(deps: { auth: Authenticator; exec: ExecService; log: Logger }) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 })
  return (req: IncomingMessage, socket: Duplex, head: Buffer): boolean => {
    const url = new URL(req.url ?? '/', 'http://x')
    const m = PATH.exec(url.pathname)
    if (!m) return false
    // browsers cannot set headers on a WebSocket: `?key=` is accepted here (and only here)
    const principal = deps.auth.principal(apiKeyIn(req.headers) ?? url.searchParams.get('key'))
    if (!principal) {
      refuse(socket, 401, 'Unauthorized')
      return true
    }
    const sandboxId = m[1] as string
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, principal.keyId, sandboxId, deps))
    return true
  }
}

function serve(ws: WebSocket, owner: string, sandboxId: string, deps: { exec: ExecService; log: Logger }): void {
  const fail = (err: unknown) => {
    const e = err instanceof AppError ? err : new AppError('INTERNAL', 'terminal failed')
    sendJson(ws, { type: 'error', error: { code: e.code, message: e.message } })
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
    deps.exec
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
              return sendJson(ws, {
                type: 'error',
                error: { code: 'VALIDATION_FAILED', message: 'a text message must be {"type":"resize"|"kill", ...}' },
              })
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
  ws.on('error', (err) => deps.log.warn({ err: String(err), sandboxId }, 'terminal socket error'))
}
