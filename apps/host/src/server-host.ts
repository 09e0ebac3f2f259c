// `forkbox server`: a control-plane replica with no agent of its own; hosts (`forkbox agent`)
// join it, and any number of replicas share one Postgres.
import { chmodSync, mkdirSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { createControlPlane } from '@forkbox/server'
import { getRequestListener } from '@hono/node-server'
import { loadServerHostConfig, type ServerHostConfig, type ServerHostOptions } from './config.ts'
import { listen } from './listen.ts'

export interface ServerHost {
  url: string
  port: number
  bootstrapKey: string | null
  config: ServerHostConfig
  close(): Promise<void>
}

export async function startServerHost(opts: ServerHostOptions = {}): Promise<ServerHost> {
  const config = loadServerHostConfig(opts)
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  chmodSync(config.dataDir, 0o700)
  const cp = await createControlPlane({
    config: {
      dbPath: join(config.dataDir, 'forkbox.db'),
      databaseUrl: config.databaseUrl,
      secretPath: config.secretPath,
      joinToken: config.joinToken,
      hostGraceSeconds: config.hostGraceSeconds,
      startingTimeoutSeconds: config.startingTimeoutSeconds,
      logLevel: config.logLevel,
      maxSandboxes: config.maxSandboxes,
      idleTimeoutSeconds: config.idleTimeoutSeconds,
      idleAction: config.idleAction,
      portsDomain: config.portsDomain,
      portsPathRoute: config.portsPathRoute,
    },
  })
  const server = createServer(getRequestListener(cp.app.fetch))
  server.on('upgrade', cp.upgrade)
  const { port, url } = await listen(server, config.port, config.host)
  return {
    url,
    port,
    bootstrapKey: cp.bootstrapKey,
    config,
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await cp.close()
    },
  }
}
