export { LocalAgent } from './agent.ts'
export { type AgentConfig, type AgentConfigInput, AgentSettings, defaultAgentConfig } from './config.ts'
export { CLOSED, networkNames } from './network/manager.ts'
