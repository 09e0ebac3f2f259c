/**
 * forkbox tools for LangChain.js.
 * @module @forkbox/ai/langchain
 */
// forkbox tools for LangChain.js (`@langchain/core`): structured tools whose ToolMessages carry
// charts as standard image content blocks, and a failing cell or command as a ToolMessage with
// status `error` the model reads.
//
//   const box = sandboxTools()
//   const model = chatModel.bindTools(box.tools)   // then your agent loop, or LangGraph's
//   ...
//   await box.close()
import { ToolMessage } from '@langchain/core/messages'
import { type StructuredToolInterface, tool } from '@langchain/core/tools'
import {
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

/** Content blocks: the text, then each image as a base64 `image` block. */
function content(output: ToolOutput) {
  if (output.images.length === 0) return output.text
  return [
    { type: 'text' as const, text: output.text },
    ...output.images.map((i) => ({ type: 'image' as const, data: i.data, mimeType: i.mediaType })),
  ]
}

/** Called with a tool call, a ToolMessage (status `error` on failure); called with bare input, the content. */
function answer(name: ToolName, output: ToolOutput, toolCallId: string | undefined) {
  if (!toolCallId) return content(output)
  return new ToolMessage({
    content: content(output),
    tool_call_id: toolCallId,
    name,
    status: output.isError ? 'error' : 'success',
  })
}

export interface SandboxTools {
  /** `run_code`, `run_command`, `read_file`, `write_file`: bind them to a chat model. */
  tools: StructuredToolInterface[]
  session: SandboxSession
  /** Kills the sandbox the tools made (none is made until a tool is first called). */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** The four sandbox tools over one sandbox, made on the first tool call. */
export function sandboxTools(options: SandboxSessionOptions = {}): SandboxTools {
  const session = new SandboxSession(options)
  const tools = [
    tool(async (input, config) => answer('run_code', await runTool('run_code', session, input), config.toolCall?.id), {
      name: 'run_code',
      description: TOOLS.run_code.description,
      schema: RunCodeInput,
    }),
    tool(
      async (input, config) => answer('run_command', await runTool('run_command', session, input), config.toolCall?.id),
      { name: 'run_command', description: TOOLS.run_command.description, schema: RunCommandInput },
    ),
    tool(
      async (input, config) => answer('read_file', await runTool('read_file', session, input), config.toolCall?.id),
      { name: 'read_file', description: TOOLS.read_file.description, schema: ReadFileInput },
    ),
    tool(
      async (input, config) => answer('write_file', await runTool('write_file', session, input), config.toolCall?.id),
      { name: 'write_file', description: TOOLS.write_file.description, schema: WriteFileInput },
    ),
  ] as StructuredToolInterface[]
  return { tools, session, close: () => session.close(), [Symbol.asyncDispose]: () => session.close() }
}

export { SandboxSession, type SandboxSessionOptions, type ToolOutput } from './core.ts'
