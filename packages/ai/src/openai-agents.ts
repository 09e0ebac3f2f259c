/**
 * forkbox tools for the OpenAI Agents SDK, and a sandbox per run.
 * @module @forkbox/ai/openai-agents
 */
// forkbox tools for the OpenAI Agents SDK (`@openai/agents`): function tools whose results carry
// charts as images, and `runWithSandbox`, which gives one agent run a sandbox of its own and kills
// it when the run ends, however it ends.
//
//   const result = await runWithSandbox(new Agent({ name: 'analyst', instructions }), 'Plot ...')
import { type Agent, type AgentInputItem, run, type Tool, tool } from '@openai/agents'
import { z } from 'zod'
import { runTool, SandboxSession, type SandboxSessionOptions, TOOLS, type ToolOutput } from './core.ts'

// Strict function schemas (what the Agents SDK takes from zod) have no optional fields: a field
// the model may leave out is nullable instead.
const RunCode = z.object({
  code: z.string(),
  language: z.enum(['python', 'javascript', 'typescript', 'bash']).nullable().describe('null: python'),
})
const RunCommand = z.object({ command: z.string(), timeoutSeconds: z.number().int().nullable().describe('null: 60') })
const ReadFile = z.object({ path: z.string() })
const WriteFile = z.object({ path: z.string(), content: z.string() })

/** Text, then the images, as the Agents SDK's structured tool output. */
function toolResult(output: ToolOutput) {
  if (output.images.length === 0) return output.text
  return [
    { type: 'text' as const, text: output.text },
    ...output.images.map((i) => ({ type: 'image' as const, image: { data: i.data, mediaType: i.mediaType } })),
  ]
}

/** The four sandbox tools over `session`'s sandbox (made on the first call). */
export function sandboxTools(session: SandboxSession): Tool[] {
  return [
    tool({
      name: 'run_code',
      description: TOOLS.run_code.description,
      parameters: RunCode,
      execute: async ({ code, language }) =>
        toolResult(await runTool('run_code', session, { code, language: language ?? undefined })),
    }),
    tool({
      name: 'run_command',
      description: TOOLS.run_command.description,
      parameters: RunCommand,
      execute: async ({ command, timeoutSeconds }) =>
        toolResult(await runTool('run_command', session, { command, timeoutSeconds: timeoutSeconds ?? undefined })),
    }),
    tool({
      name: 'read_file',
      description: TOOLS.read_file.description,
      parameters: ReadFile,
      execute: async (input) => toolResult(await runTool('read_file', session, input)),
    }),
    tool({
      name: 'write_file',
      description: TOOLS.write_file.description,
      parameters: WriteFile,
      execute: async (input) => toolResult(await runTool('write_file', session, input)),
    }),
  ]
}

export interface RunWithSandboxOptions extends SandboxSessionOptions {
  /** Turns the agent may take (the Agents SDK's `maxTurns`). */
  maxTurns?: number
  signal?: AbortSignal
}

/**
 * Runs `agent` on `input` with the sandbox tools added to its own, in a sandbox made for this run
 * (when the model first calls a tool) and killed when the run ends, also when it throws.
 */
export async function runWithSandbox(
  agent: Agent,
  input: string | AgentInputItem[],
  options: RunWithSandboxOptions = {},
) {
  const session = new SandboxSession(options)
  try {
    const withTools = agent.clone({ tools: [...agent.tools, ...sandboxTools(session)] })
    const result = await run(withTools, input, { maxTurns: options.maxTurns, signal: options.signal })
    return { result, sandboxId: await session.sandboxId() }
  } finally {
    await session.close()
  }
}

export { SandboxSession, type SandboxSessionOptions, type ToolOutput } from './core.ts'
