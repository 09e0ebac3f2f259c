/**
 * The framework-neutral core of the agent-framework tools.
 * @module @forkbox/ai
 */
// @forkbox/ai: forkbox sandboxes as tools for agent frameworks. The framework-neutral core is
// here; each framework's layer is its own entry point (`@forkbox/ai/vercel`,
// `@forkbox/ai/openai-agents`, `@forkbox/ai/langchain`), so an app loads only the one it uses.
export {
  executionOutput,
  ReadFileInput,
  RunCodeInput,
  RunCommandInput,
  runTool,
  SandboxSession,
  type SandboxSessionOptions,
  TOOLS,
  type ToolName,
  type ToolOutput,
  WriteFileInput,
} from './core.ts'
