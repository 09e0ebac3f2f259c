// The control plane: store, services and HTTP app over an agent it is handed.
import type { AgentApi } from '@forkbox/protocol'
import pino, { type Logger } from 'pino'
import { ServerConfig, type ServerConfigInput } from './config.ts'
import { createApp } from './http/app.ts'
import type { App } from './http/env.ts'
import { CodeService } from './services/code.ts'
import { ExecService } from './services/exec.ts'
import { SandboxService } from './services/sandboxes.ts'
import { openDb } from './store/db.ts'
import { KeyStore } from './store/keys.ts'
import { SandboxStore } from './store/sandboxes.ts'
import { SnapshotStore } from './store/snapshots.ts'

export interface ControlPlane {
  app: App
  sandboxes: SandboxService
  keys: KeyStore
  /** A new admin key when the store had none; shown once. */
  bootstrapKey: string | null
  close(): Promise<void>
}

export async function createControlPlane(opts: {
  config: ServerConfigInput
  agent: AgentApi
  log?: Logger
}): Promise<ControlPlane> {
  const config = ServerConfig.parse(opts.config)
  const log = opts.log ?? pino({ level: config.logLevel })
  const db = openDb(config.dbPath)
  const keys = new KeyStore(db)
  const sandboxes = new SandboxService(
    new SandboxStore(db),
    opts.agent,
    log,
    {
      maxSandboxes: config.maxSandboxes,
      idleTimeoutMs: config.idleTimeoutSeconds * 1000,
      idleAction: config.idleAction,
    },
    new SnapshotStore(db),
  )
  await sandboxes.recover()
  const bootstrapKey = keys.count() === 0 ? keys.create('admin', true).key : null
  const code = new CodeService(sandboxes, opts.agent)
  const exec = new ExecService(sandboxes, opts.agent)
  const app = createApp({ sandboxes, code, exec, keys, config, log, templates: () => opts.agent.templates() })
  const reaper = setInterval(() => {
    try {
      sandboxes.reap()
    } catch (err) {
      log.error({ err }, 'reaper failed')
    }
  }, config.reaperIntervalMs)
  reaper.unref()
  return {
    app,
    sandboxes,
    keys,
    bootstrapKey,
    async close() {
      clearInterval(reaper)
      await sandboxes.drain()
      db.close()
    },
  }
}

export { ServerConfig, type ServerConfigInput } from './config.ts'
