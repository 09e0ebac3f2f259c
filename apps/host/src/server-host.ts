// `forkbox server`: a control-plane replica with no agent of its own; hosts (`forkbox agent`)
// join it, and any number of replicas share one Postgres.
import { chmodSync, mkdirSync } from 'node:fs'
import { createControlPlane } from '@forkbox/server'
import { loadServerHostConfig, type ServerHostConfig, type ServerHostOptions, serverSettingsOf } from './config.ts'
import { serveControlPlane } from './listen.ts'

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
    config: serverSettingsOf(config, config.dataDir),
  })
  const served = await serveControlPlane(cp, config)
  const { port, url } = served
  return {
    url,
    port,
    bootstrapKey: cp.bootstrapKey,
    config,
    async close() {
      await served.close()
      await cp.close()
    },
  }
}
