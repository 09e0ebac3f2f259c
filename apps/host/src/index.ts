// One host: the control plane and the local agent in one process, served over HTTP.

import { defaultAgentConfig } from '@forkbox/agent'
import type { TemplateProgress } from '@forkbox/protocol'
import { agentSettingsOf, type HostConfig, type HostOptions, loadHostConfig } from './config.ts'
import { type ControlPlaneHost, startControlPlane } from './start-control-plane.ts'

export type Host = ControlPlaneHost<HostConfig>

export async function startHost(
  opts: HostOptions & { onTemplateProgress?: (p: TemplateProgress) => void } = {},
): Promise<Host> {
  const { onTemplateProgress, ...rest } = opts
  const config = loadHostConfig(rest)
  return await startControlPlane(config, {
    config: defaultAgentConfig(agentSettingsOf(config)),
    prebuild: config.prebuild,
    onTemplateProgress,
  })
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
