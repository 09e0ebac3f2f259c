// What every request handler can reach through `c.var`.
import type { OpenAPIHono } from '@hono/zod-openapi'
import type { Logger } from 'pino'
import type { ServerConfig } from '../config.ts'
import type { Metrics } from '../metrics.ts'
import type { CodeService } from '../services/code.ts'
import type { ExecService } from '../services/exec.ts'
import type { SandboxService } from '../services/sandboxes.ts'
import type { KeyStore, Principal } from '../store/keys.ts'
import type { Authenticator } from './auth.ts'

export interface Services {
  sandboxes: SandboxService
  code: CodeService
  exec: ExecService
  metrics: Metrics
  keys: KeyStore
  auth: Authenticator
  config: ServerConfig
  log: Logger
  templates: () => Promise<import('@forkbox/protocol').TemplateInfo[]>
}

export interface AppEnv {
  Variables: {
    requestId: string
    principal: Principal
    services: Services
  }
}

export type App = OpenAPIHono<AppEnv>
