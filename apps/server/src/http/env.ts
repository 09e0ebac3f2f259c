// What every request handler can reach through `c.var` (and, from the Node server, `c.env`).
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { AppError } from '@forkbox/protocol'
import type { OpenAPIHono } from '@hono/zod-openapi'
import type { Context } from 'hono'
import type { Logger } from 'pino'
import type { ServerConfig } from '../config.ts'
import type { HostService } from '../fleet/hosts-service.ts'
import type { Metrics } from '../metrics.ts'
import type { CodeService } from '../services/code.ts'
import type { ExecService } from '../services/exec.ts'
import type { FileService } from '../services/files.ts'
import type { SandboxCalls } from '../services/sandbox-calls.ts'
import type { SandboxEvents } from '../services/sandbox-events.ts'
import type { SandboxService } from '../services/sandboxes.ts'
import type { TemplateService } from '../services/templates.ts'
import type { AuditStore } from '../store/audit.ts'
import type { KeyStore, Principal } from '../store/keys.ts'
import type { RateLimiter } from '../store/rate-limits.ts'
import type { RegistryCredentialStore } from '../store/registry-credentials.ts'
import type { UsageStore } from '../store/usage.ts'
import type { Authenticator, TokenPurpose } from './auth.ts'

/** Who is calling: a key, or the bearer of a sandbox token (checked against its sandbox later; credentials.ts). */
export type Caller =
  | { kind: 'key'; principal: Principal }
  | { kind: 'token'; purpose: TokenPurpose; token: string; from: 'header' | 'query' | 'cookie' }

/** How an entry point's clients read an error: its HTTP status and body (errors.ts). */
export interface ErrorFormat<B extends object = object> {
  status(e: AppError): number
  body(e: AppError, requestId: string): B
}

/** What every route may use; an adapter adds its own (e2b/template-builds.ts declares `e2bTemplates`). */
export interface Services {
  sandboxes: SandboxService
  events: SandboxEvents
  /** The call path of every operation on a running sandbox. */
  calls: SandboxCalls
  files: FileService
  code: CodeService
  exec: ExecService
  metrics: Metrics
  keys: KeyStore
  audit: AuditStore
  usage: UsageStore
  rateLimiter: RateLimiter
  auth: Authenticator
  config: ServerConfig
  log: Logger
  templates: TemplateService
  registries: RegistryCredentialStore
  /** The fleet's hosts (`forkbox server`); null when the control plane runs its own agent. */
  hosts: HostService | null
}

/**
 * What the Node server hands a request (absent under `app.request()` in tests): its message and
 * response, and for an HTTP upgrade the socket and its first bytes instead of a response.
 */
export interface NodeBindings {
  incoming?: IncomingMessage
  outgoing?: ServerResponse
  upgrade?: { socket: Duplex; head: Buffer }
}

export interface AppEnv {
  Bindings: NodeBindings
  Variables: {
    requestId: string
    /** Who is calling (http/credentials.ts); `principal` too when it is a key. */
    caller: Caller
    principal: Principal
    services: Services
    /** How this route group's errors go out (forkbox's own unless set). */
    errorFormat?: ErrorFormat
    /** What counts as a write on this route group (http/tenancy.ts `writes`): the HTTP method unless set. */
    writes?: (c: Context<AppEnv>) => boolean
    /** The cookie an exposed port's token may come in (set by the port route for `portToken`). */
    portCookie?: string
    /** E2B's data plane reached on a sandbox's own name (`49983-{id}.{domain}`): which sandbox and port. */
    e2bSandbox?: { id: string; port: number }
  }
}

export type App = OpenAPIHono<AppEnv>
