// What every framework integration shares: the sandbox a conversation's tools run in (made on the
// first tool call, killed by `close()`), the four tools (run code, run a command, read and write a
// file) with their input schemas, and their results as text plus images, which each framework's
// layer turns into its own tool-result shape. A failing cell or command is a result the model
// reads (its error and traceback), not an exception.
import { type CreateSandboxOptions, type Execution, type Language, Sandbox } from '@forkbox/sdk'
import { z } from 'zod'

export interface SandboxSessionOptions {
  /** Run the tools in this sandbox (never killed by the session); else one is made on first use. */
  sandbox?: Sandbox
  /** How the session's own sandbox is made; default template `code-interpreter`, TTL 10 minutes. */
  create?: CreateSandboxOptions
}

/** The sandbox of one conversation or agent run: made when a tool first needs it. */
export class SandboxSession {
  readonly #given: Sandbox | undefined
  readonly #create: CreateSandboxOptions
  #made: Promise<Sandbox> | undefined
  #madeId: string | undefined
  #closed = false

  constructor(options: SandboxSessionOptions = {}) {
    this.#given = options.sandbox
    this.#create = { template: 'code-interpreter', ttlSeconds: 600, ...options.create }
  }

  /** The sandbox, made now if this is the first call. */
  sandbox(): Promise<Sandbox> {
    if (this.#given) return Promise.resolve(this.#given)
    if (this.#closed) return Promise.reject(new Error('the sandbox session is closed'))
    this.#made ??= Sandbox.create(this.#create).then((sbx) => {
      this.#madeId = sbx.id
      return sbx
    })
    return this.#made
  }

  /** The id of the session's sandbox, once there is one (also after `close()`). */
  async sandboxId(): Promise<string | undefined> {
    if (this.#given) return this.#given.id
    await this.#made?.catch(() => undefined)
    return this.#madeId
  }

  /** Kills the sandbox the session made (a given one is left running). Safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true
    const made = this.#made
    this.#made = undefined
    if (!made) return
    const sbx = await made.catch(() => undefined)
    await sbx?.kill()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}

/** What a tool hands back: text for the model, images (base64) it may look at, and whether it failed. */
export interface ToolOutput {
  text: string
  images: { data: string; mediaType: string }[]
  isError: boolean
}

export const RunCodeInput = z.object({
  code: z.string().describe('The code to run. Variables, imports and files persist between calls.'),
  language: z
    .enum(['python', 'javascript', 'typescript', 'bash'])
    .optional()
    .describe('Default python. Charts drawn with matplotlib come back as images.'),
})

export const RunCommandInput = z.object({
  command: z.string().describe('A shell command, run with bash in /work.'),
  timeoutSeconds: z.number().int().positive().max(600).optional().describe('Default 60.'),
})

export const ReadFileInput = z.object({ path: z.string().describe('An absolute path, or one relative to /work.') })

export const WriteFileInput = z.object({
  path: z.string().describe('An absolute path, or one relative to /work; parent directories are created.'),
  content: z.string().describe('The whole text of the file.'),
})

const MAX_TEXT = 20_000

function clip(text: string): string {
  return text.length <= MAX_TEXT ? text : `${text.slice(0, MAX_TEXT)}\n[... ${text.length - MAX_TEXT} more characters]`
}

function resolvePath(path: string): string {
  return path.startsWith('/') ? path : `/work/${path}`
}

/** A cell's outcome as a model reads it: output, the value, tables as text, the error with its traceback. */
export function executionOutput(execution: Execution): ToolOutput {
  const parts: string[] = []
  const stdout = execution.logs.stdout.join('')
  const stderr = execution.logs.stderr.join('')
  if (stdout) parts.push(`stdout:\n${stdout}`)
  if (stderr) parts.push(`stderr:\n${stderr}`)
  const images: ToolOutput['images'] = []
  for (const result of execution.results) {
    if (result.png) images.push({ data: result.png, mediaType: 'image/png' })
    else if (result.jpeg) images.push({ data: result.jpeg, mediaType: 'image/jpeg' })
    if (result.text && !(result.png || result.jpeg))
      parts.push(result.isMainResult ? `result: ${result.text}` : result.text)
    else if (result.png || result.jpeg) parts.push(`[image${result.text ? `: ${result.text}` : ''}]`)
  }
  const { error } = execution
  if (error) parts.push(`error: ${error.name}: ${error.value}\n${error.traceback}`)
  if (parts.length === 0) parts.push('(no output)')
  return { text: clip(parts.join('\n')), images, isError: error !== null }
}

export async function runCode(session: SandboxSession, input: z.infer<typeof RunCodeInput>): Promise<ToolOutput> {
  const sbx = await session.sandbox()
  const language: Language = input.language ?? 'python'
  return executionOutput(await sbx.runCode(input.code, { language }))
}

export async function runCommand(session: SandboxSession, input: z.infer<typeof RunCommandInput>): Promise<ToolOutput> {
  const sbx = await session.sandbox()
  const r = await sbx.exec(input.command, { cwd: '/work', timeoutSeconds: input.timeoutSeconds ?? 60 })
  const parts = [`exit code: ${r.exitCode}${r.timedOut ? ' (timed out)' : ''}`]
  if (r.stdout) parts.push(`stdout:\n${r.stdout}`)
  if (r.stderr) parts.push(`stderr:\n${r.stderr}`)
  return { text: clip(parts.join('\n')), images: [], isError: r.exitCode !== 0 }
}

export async function readFile(session: SandboxSession, input: z.infer<typeof ReadFileInput>): Promise<ToolOutput> {
  const sbx = await session.sandbox()
  const text = await sbx.files.read(resolvePath(input.path))
  return { text: clip(text), images: [], isError: false }
}

export async function writeFile(session: SandboxSession, input: z.infer<typeof WriteFileInput>): Promise<ToolOutput> {
  const sbx = await session.sandbox()
  const path = resolvePath(input.path)
  const entry = await sbx.files.write(path, input.content)
  return { text: `wrote ${entry.size} bytes to ${path}`, images: [], isError: false }
}

/** The four tools, framework-neutral: each layer wraps these in its own `tool()`. */
export const TOOLS = {
  run_code: {
    description:
      'Run code in a persistent Jupyter-like sandbox (Python by default, with numpy, pandas and matplotlib). Returns stdout, stderr, the value of the last expression, charts as images, and errors with their traceback.',
    schema: RunCodeInput,
    run: runCode,
  },
  run_command: {
    description:
      'Run a shell command in the sandbox (a Debian Linux machine). Returns its exit code, stdout and stderr.',
    schema: RunCommandInput,
    run: runCommand,
  },
  read_file: { description: 'Read a text file from the sandbox.', schema: ReadFileInput, run: readFile },
  write_file: { description: 'Write a text file in the sandbox.', schema: WriteFileInput, run: writeFile },
} as const

export type ToolName = keyof typeof TOOLS

/** Runs one tool; a failure of the call itself (no such file, sandbox gone) is an error output too. */
export async function runTool<N extends ToolName>(
  name: N,
  session: SandboxSession,
  input: z.infer<(typeof TOOLS)[N]['schema']>,
): Promise<ToolOutput> {
  const tool = TOOLS[name] as { run: (s: SandboxSession, i: unknown) => Promise<ToolOutput> }
  try {
    return await tool.run(session, input)
  } catch (err) {
    const e = err as { code?: string; message?: string }
    return { text: `error: ${e.code ?? 'ERROR'}: ${e.message ?? String(err)}`, images: [], isError: true }
  }
}
