// Starting a host's control plane, `forkbox up`'s (with its one local agent) or a replica's: its
// data dir made the owner's only, the control plane opened over it, and served on the host's port.
import { chmodSync, mkdirSync } from 'node:fs'
import { type AgentConfig, LocalAgent } from '@forkbox/agent'
import type { TemplateProgress } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane } from '@forkbox/server'
import { type ControlPlaneHostSettings, serverSettingsOf } from './config.ts'
import { type Served, serveControlPlane } from './listen.ts'

/** A control plane served by a host, and the settings the host was started with. */
export interface ControlPlaneHost<C extends ControlPlaneHostSettings> {
  url: string
  port: number
  bootstrapKey: string | null
  config: C
  close(): Promise<void>
}

/** `forkbox up`'s own agent: the one its control plane drives. */
export interface LocalAgentOptions {
  config: AgentConfig
  /** Templates built (if missing) before the server starts answering. */
  prebuild: readonly string[]
  onTemplateProgress?: ((p: TemplateProgress) => void) | undefined
}

/**
 * Starts the control plane `config` describes; with `localAgent` it drives that agent, without
 * it the hosts that join it. A start that fails (the network block in use, the port taken)
 * leaves nothing of ours behind.
 */
export async function startControlPlane<C extends ControlPlaneHostSettings>(
  config: C,
  localAgent?: LocalAgentOptions,
): Promise<ControlPlaneHost<C>> {
  // the owner's only: the database, the server secret, snapshots and hibernated sandboxes' memory
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  chmodSync(config.dataDir, 0o700)
  const agent = localAgent && (await startLocalAgent(localAgent))
  let cp: ControlPlane | undefined
  let served: Served
  try {
    cp = await createControlPlane({ agent, config: serverSettingsOf(config) })
    served = await serveControlPlane(cp, config)
  } catch (err) {
    // the agent's state and fork scratch dirs go with it
    await cp?.close().catch(() => {})
    await agent?.close().catch(() => {})
    throw err
  }
  const started = cp
  return {
    url: served.url,
    port: served.port,
    bootstrapKey: started.bootstrapKey,
    config,
    async close() {
      await served.close()
      await agent?.close()
      await started.close()
    },
  }
}

/** The agent, cleared of what a previous process left and with its templates built; closed again if that fails. */
async function startLocalAgent(opts: LocalAgentOptions): Promise<LocalAgent> {
  const agent = new LocalAgent(opts.config)
  try {
    // first, before anything of ours exists: remove what a previous process left
    await agent.reconcile()
    for (const t of opts.prebuild) await agent.ensureTemplate(t, opts.onTemplateProgress)
    return agent
  } catch (err) {
    await agent.close().catch(() => {})
    throw err
  }
}
