/**
 * forkbox tools for the Vercel AI SDK.
 * @module @forkbox/ai/vercel
 */
// forkbox tools for the Vercel AI SDK (`ai`): `tool()` definitions whose results the model reads
// as text, with charts as image parts.
//
//   const box = sandboxTools()
//   try { await generateText({ model, tools: box.tools, stopWhen: stepCountIs(10), prompt }) }
//   finally { await box.close() }
import { type Tool, tool } from 'ai'
import type { z } from 'zod'
import {
  ReadFileInput,
  RunCodeInput,
  RunCommandInput,
  runTool,
  SandboxSession,
  type SandboxSessionOptions,
  TOOLS,
  type ToolOutput,
  WriteFileInput,
} from './core.ts'

/** What the model gets back: an error's text as an error, anything with images as content parts. */
function toModelOutput({ output }: { output: ToolOutput }) {
  if (output.images.length === 0)
    return output.isError
      ? { type: 'error-text' as const, value: output.text }
      : { type: 'text' as const, value: output.text }
  return {
    type: 'content' as const,
    value: [
      { type: 'text' as const, text: output.text },
      ...output.images.map((i) => ({ type: 'image-data' as const, data: i.data, mediaType: i.mediaType })),
    ],
  }
}

export interface SandboxTools {
  /** Pass to `generateText` / `streamText` as `tools` (or spread into yours). */
  tools: {
    run_code: Tool<z.infer<typeof RunCodeInput>, ToolOutput>
    run_command: Tool<z.infer<typeof RunCommandInput>, ToolOutput>
    read_file: Tool<z.infer<typeof ReadFileInput>, ToolOutput>
    write_file: Tool<z.infer<typeof WriteFileInput>, ToolOutput>
  }
  session: SandboxSession
  /** Kills the sandbox the tools made (none is made until the model first calls a tool). */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** The four sandbox tools over one sandbox, made on the model's first tool call. */
export function sandboxTools(options: SandboxSessionOptions = {}): SandboxTools {
  const session = new SandboxSession(options)
  return {
    tools: {
      run_code: tool({
        description: TOOLS.run_code.description,
        inputSchema: RunCodeInput,
        execute: (input) => runTool('run_code', session, input),
        toModelOutput,
      }),
      run_command: tool({
        description: TOOLS.run_command.description,
        inputSchema: RunCommandInput,
        execute: (input) => runTool('run_command', session, input),
        toModelOutput,
      }),
      read_file: tool({
        description: TOOLS.read_file.description,
        inputSchema: ReadFileInput,
        execute: (input) => runTool('read_file', session, input),
        toModelOutput,
      }),
      write_file: tool({
        description: TOOLS.write_file.description,
        inputSchema: WriteFileInput,
        execute: (input) => runTool('write_file', session, input),
        toModelOutput,
      }),
    },
    session,
    close: () => session.close(),
    [Symbol.asyncDispose]: () => session.close(),
  }
}

export { SandboxSession, type SandboxSessionOptions, type ToolOutput } from './core.ts'
