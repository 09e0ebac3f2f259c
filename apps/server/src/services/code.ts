// Code interpreter: cells run in a sandbox's code contexts; their output and results come back
// as they happen (to a stream) and together as one Execution.
import { StringDecoder } from 'node:string_decoder'
import {
  AppError,
  type CodeContext,
  type CodeResult,
  type CreateContextRequest,
  type Execution,
  type GuestContextOps,
  type RunCodeRequest,
} from '@forkbox/protocol'
import type { z } from 'zod'
import type { Metrics } from '../metrics.ts'
import type { ServedBy } from './guest-ops-served.ts'
import type { SandboxCalls } from './sandbox-calls.ts'

type RunCodeInput = z.output<typeof RunCodeRequest>
type CreateContextInput = z.output<typeof CreateContextRequest>

/** What a streaming caller hears while a cell runs. */
export interface ExecutionSink {
  stdout?(text: string): void
  stderr?(text: string): void
  result?(result: CodeResult): void
}

export interface CodeServiceOptions {
  calls: SandboxCalls
  metrics?: Metrics
}

export class CodeService {
  private readonly calls: SandboxCalls
  private readonly metrics?: Metrics

  constructor(o: CodeServiceOptions) {
    this.calls = o.calls
    this.metrics = o.metrics
  }

  async run(owner: string, id: string, req: RunCodeInput, sink: ExecutionSink = {}, signal?: AbortSignal) {
    const logs = { stdout: [] as string[], stderr: [] as string[] }
    const results: CodeResult[] = []
    // a multi-byte character split across two chunks is decoded whole
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
    const text = (name: 'stdout' | 'stderr', chunk?: Uint8Array) => {
      const s = chunk ? decoders[name].write(Buffer.from(chunk)) : decoders[name].end()
      if (!s) return
      logs[name].push(s)
      sink[name]?.(s)
    }
    const out = await this.calls.onSandbox(owner, id, (sbx) =>
      sbx.runCode(
        {
          code: req.code,
          language: req.language,
          context: req.contextId,
          env: req.envs,
          timeoutMs: Math.round(req.timeoutSeconds * 1000),
          maxOutputBytes: req.maxOutputBytes,
        },
        {
          onStdout: (c) => text('stdout', c),
          onStderr: (c) => text('stderr', c),
          onResult: (r) => {
            results.push(r)
            sink.result?.(r)
          },
        },
        signal,
      ),
    )
    text('stdout')
    text('stderr')
    this.metrics?.execSeconds.observe({ kind: 'code' }, out.durationMs / 1000)
    const execution: Execution = { results, logs, ...out }
    return execution
  }

  async createContext(owner: string, id: string, req: CreateContextInput): Promise<CodeContext> {
    const op = { op: 'context_create' as const, language: req.language, cwd: req.cwd, env: req.envs }
    return this.calls.onSandbox(owner, id, (sbx) => sbx.codeContext(op))
  }

  async listContexts(owner: string, id: string): Promise<CodeContext[]> {
    const op = { op: 'context_list' as const }
    return this.calls.onSandbox(owner, id, (sbx) => sbx.codeContext(op))
  }

  async restartContext(owner: string, id: string, context: string): Promise<CodeContext> {
    const op = { op: 'context_restart' as const, context }
    return this.calls.onSandbox(owner, id, (sbx) => sbx.codeContext(op))
  }

  async removeContext(owner: string, id: string, context: string): Promise<void> {
    if (context === 'python' || context === 'bash' || context === 'javascript')
      throw new AppError('VALIDATION_FAILED', `the default ${context} context can be restarted but not removed`)
    const op = { op: 'context_remove' as const, context }
    await this.calls.onSandbox(owner, id, (sbx) => sbx.codeContext(op))
  }
}

/** Which method serves each of the guest's code-context operations (see guest-ops-served.ts). */
export const contextOpsServed = {
  context_create: 'createContext',
  context_list: 'listContexts',
  context_restart: 'restartContext',
  context_remove: 'removeContext',
} as const satisfies ServedBy<GuestContextOps, CodeService>
