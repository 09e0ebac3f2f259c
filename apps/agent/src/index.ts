export { LocalAgent } from './agent.ts'
export { type AgentConfig, defaultAgentConfig } from './config.ts'
export { CLOSED, networkNames } from './network/manager.ts'
