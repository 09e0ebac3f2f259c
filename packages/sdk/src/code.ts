// Code interpreter: cells in persistent interpreters (code contexts) and what they hand back.
import type {
  CodeContext,
  CodeLanguage,
  CodeResult,
  Execution as ExecutionData,
  ExecutionError,
  RunCodeRequest,
} from '@forkbox/protocol'
import { ForkboxError } from './errors.ts'
import { type HttpClient, pathOf, type RequestOptions } from './http.ts'
import { eventError, serverSentEvents } from './sse.ts'

export type { CodeContext, ExecutionError }
export type Language = (typeof CodeLanguage.options)[number]

/**
 * One value a cell displayed, in every representation it offers: `text`, `html`, `markdown`,
 * `png` / `jpeg` (base64), `svg`, `json`, `latex`, ... The value of a cell's last expression
 * has `isMainResult: true`; figures and `display()` calls are the others.
 */
export type Result = CodeResult

export interface RunCodeOptions extends RequestOptions {
  /** `python` (default) or `bash`; ignored when `context` is given. */
  language?: Language
  /** Run in this context instead of the language's default one. */
  context?: CodeContext | string
  /** Environment variables for this cell only. */
  envs?: Record<string, string>
  /** The cell is interrupted after this long (default 300); its kernel's state survives. */
  timeoutSeconds?: number
  /** Cap on stdout and on stderr each; beyond it output is dropped and `truncated: true`. */
  maxOutputBytes?: number
  /** Called with each piece of output as the cell runs (streamed). */
  onStdout?: (text: string) => void
  onStderr?: (text: string) => void
  /** Called with each result as soon as it is displayed. */
  onResult?: (result: Result) => void
}

export interface CreateCodeContextOptions extends RequestOptions {
  language?: Language
  /** Working directory of the interpreter (created if missing); default the user's home. */
  cwd?: string
  envs?: Record<string, string>
}

/** What a cell did: results, output, and the error it raised, if any. */
export class Execution {
  readonly results: Result[]
  readonly logs: { stdout: string[]; stderr: string[] }
  /** The exception the cell raised (a timeout is `TimeoutError`, a dead kernel `KernelDiedError`). */
  readonly error: ExecutionError | null
  readonly executionCount: number | null
  readonly timedOut: boolean
  readonly truncated: boolean
  readonly durationMs: number

  constructor(data: ExecutionData) {
    this.results = data.results
    this.logs = data.logs
    this.error = data.error
    this.executionCount = data.executionCount
    this.timedOut = data.timedOut
    this.truncated = data.truncated
    this.durationMs = data.durationMs
  }

  /** The text of the main result (the last expression's value), if there is one. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text
  }

  toJSON(): ExecutionData {
    const { results, logs, error, executionCount, timedOut, truncated, durationMs } = this
    return { results, logs, error, executionCount, timedOut, truncated, durationMs }
  }
}

function contextId(context: CodeContext | string): string {
  return typeof context === 'string' ? context : context.id
}

export async function runCode(
  http: HttpClient,
  sandboxId: string,
  code: string,
  options: RunCodeOptions,
): Promise<Execution> {
  const body: RunCodeRequest = {
    code,
    language: options.language,
    contextId: options.context === undefined ? undefined : contextId(options.context),
    envs: options.envs,
    timeoutSeconds: options.timeoutSeconds,
    maxOutputBytes: options.maxOutputBytes,
  }
  const path = `${pathOf('v1', 'sandboxes', sandboxId)}/code`
  const streaming = options.onStdout || options.onStderr || options.onResult
  if (!streaming)
    return new Execution(await http.json<ExecutionData>({ method: 'POST', path, json: body, signal: options.signal }))
  const res = await http.send({ method: 'POST', path, json: body, signal: options.signal, accept: 'text/event-stream' })
  const data: ExecutionData = {
    results: [],
    logs: { stdout: [], stderr: [] },
    error: null,
    executionCount: null,
    timedOut: false,
    truncated: false,
    durationMs: 0,
  }
  for await (const { event, payload } of serverSentEvents(res)) {
    if (event === 'stdout' || event === 'stderr') {
      const text = (payload as { text: string }).text
      data.logs[event].push(text)
      ;(event === 'stdout' ? options.onStdout : options.onStderr)?.(text)
    } else if (event === 'result') {
      data.results.push(payload as Result)
      options.onResult?.(payload as Result)
    } else if (event === 'end') {
      return new Execution({ ...data, ...(payload as Omit<ExecutionData, 'results' | 'logs'>) })
    } else if (event === 'error') {
      throw eventError(payload, res)
    }
  }
  throw new ForkboxError('UNEXPECTED_RESPONSE', 'the code stream ended before the cell did', {
    requestId: res.headers.get('x-request-id') ?? undefined,
  })
}

export class CodeContexts {
  readonly #http: HttpClient
  readonly #path: string

  constructor(http: HttpClient, sandboxId: string) {
    this.#http = http
    this.#path = `${pathOf('v1', 'sandboxes', sandboxId)}/code/contexts`
  }

  create(options: CreateCodeContextOptions = {}): Promise<CodeContext> {
    const { language, cwd, envs } = options
    return this.#http.json<CodeContext>({
      method: 'POST',
      path: this.#path,
      json: { language, cwd, envs },
      signal: options.signal,
    })
  }

  async list(options: RequestOptions = {}): Promise<CodeContext[]> {
    const res = await this.#http.json<{ contexts: CodeContext[] }>({
      method: 'GET',
      path: this.#path,
      signal: options.signal,
    })
    return res.contexts
  }

  restart(context: CodeContext | string, options: RequestOptions = {}): Promise<CodeContext> {
    return this.#http.json<CodeContext>({
      method: 'POST',
      path: `${this.#path}/${encodeURIComponent(contextId(context))}/restart`,
      signal: options.signal,
    })
  }

  async remove(context: CodeContext | string, options: RequestOptions = {}): Promise<void> {
    await this.#http.empty({
      method: 'DELETE',
      path: `${this.#path}/${encodeURIComponent(contextId(context))}`,
      signal: options.signal,
    })
  }
}
