// One host: the control plane and the local agent in one process, served over HTTP.

import { chmodSync, mkdirSync } from 'node:fs'
import { defaultAgentConfig, LocalAgent } from '@forkbox/agent'
import type { TemplateProgress } from '@forkbox/protocol'
import { createControlPlane } from '@forkbox/server'
import { agentSettingsOf, type HostConfig, type HostOptions, loadHostConfig, serverSettingsOf } from './config.ts'
import { serveControlPlane } from './listen.ts'

export interface Host {
  url: string
  port: number
  bootstrapKey: string | null
  config: HostConfig
  close(): Promise<void>
}

export async function startHost(
  opts: HostOptions & { onTemplateProgress?: (p: TemplateProgress) => void } = {},
): Promise<Host> {
  const { onTemplateProgress, ...rest } = opts
  const config = loadHostConfig(rest)
  // the owner's only: the database, the server secret, snapshots and hibernated sandboxes' memory
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  chmodSync(config.dataDir, 0o700)
  const agent = new LocalAgent(defaultAgentConfig(agentSettingsOf(config)))
  let cp: Awaited<ReturnType<typeof createControlPlane>> | undefined
  let served: Awaited<ReturnType<typeof serveControlPlane>>
  try {
    // first, before anything of ours exists: remove what a previous process left
    await agent.reconcile()
    for (const t of config.prebuild) await agent.ensureTemplate(t, onTemplateProgress)
    cp = await createControlPlane({
      agent,
      config: serverSettingsOf(config, config.dataDir),
    })
    served = await serveControlPlane(cp, config)
  } catch (err) {
    // a start that fails (the network block in use, the port taken) leaves nothing of ours behind:
    // the agent's state and fork scratch dirs go with it
    await cp?.close().catch(() => {})
    await agent.close().catch(() => {})
    throw err
  }
  const { port, url } = served
  return {
    url,
    port,
    bootstrapKey: cp.bootstrapKey,
    config,
    async close() {
      await served.close()
      await agent.close()
      await cp?.close()
    },
  }
}

export { type AgentHost, startAgentHost } from './agent-host.ts'
export {
  type AgentHostOptions,
  type HostConfig,
  type HostOptions,
  loadHostConfig,
  type ServerHostOptions,
} from './config.ts'
export { type ServerHost, startServerHost } from './server-host.ts'
