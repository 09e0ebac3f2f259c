// A CliContext whose edges are fakes: captured output, a routed fetch, no real signals or host.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after } from 'node:test'
import type { CliContext, HostModule } from '../src/index.ts'
import { runCli } from '../src/index.ts'

const tempDirs: string[] = []
after(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
})

export interface SeenRequest {
  method: string
  url: URL
  body: string
}

export type Route = (req: SeenRequest) => Response | Promise<Response>

export interface Harness {
  ctx: CliContext
  requests: SeenRequest[]
  stdout(): string
  stderr(): string
  stdoutBytes(): Uint8Array
  /** Fires the handlers registered through ctx.onInterrupt, as SIGINT would. */
  interrupt(): void
  configDir: string
  run(...args: string[]): Promise<number>
}

export function harness(route: Route, extra: Partial<CliContext> = {}): Harness {
  const out: Uint8Array[] = []
  const err: Uint8Array[] = []
  const enc = new TextEncoder()
  const capture = (sink: Uint8Array[]) => ({
    write: (chunk: string | Uint8Array) => sink.push(typeof chunk === 'string' ? enc.encode(chunk) : chunk),
  })
  const requests: SeenRequest[] = []
  const handlers = new Set<() => void>()
  const fetchImpl = async (input: string | URL | Request, init?: RequestInit) => {
    const request = new Request(input, init)
    const seen = { method: request.method, url: new URL(request.url), body: await request.text() }
    requests.push(seen)
    const signal = init?.signal
    if (!signal) return route(seen)
    return new Promise<Response>((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason), { once: true })
      Promise.resolve(route(seen)).then(resolve, reject)
    })
  }
  const configDir = mkdtempSync(join(tmpdir(), 'forkbox-cli-'))
  tempDirs.push(configDir)
  const noHost: HostModule = {
    startHost: () => Promise.reject(new Error('no host in this test')),
  }
  const ctx: CliContext = {
    stdout: capture(out),
    stderr: capture(err),
    readStdin: async () => enc.encode('from stdin'),
    connection: { apiKey: 'fbx_test', url: 'http://forkbox.test', fetch: fetchImpl as typeof fetch, maxRetries: 0 },
    configSource: { env: { XDG_CONFIG_HOME: configDir } },
    loadHost: async () => noHost,
    onInterrupt: (handler) => {
      handlers.add(handler)
      return () => handlers.delete(handler)
    },
    now: () => Date.parse('2025-01-01T00:01:00Z'),
    exitCode: 0,
    stdoutIsTerminal: true,
    ...extra,
  }
  const concat = (parts: Uint8Array[]) => Buffer.concat(parts)
  return {
    ctx,
    requests,
    stdout: () => concat(out).toString('utf8'),
    stderr: () => concat(err).toString('utf8'),
    stdoutBytes: () => new Uint8Array(concat(out)),
    interrupt: () => {
      for (const h of [...handlers]) h()
    },
    configDir,
    run: (...args) => runCli(args, ctx),
  }
}

export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
}

export function sandbox(overrides: Record<string, unknown> = {}) {
  return {
    id: 'sbx_1',
    template: 'base',
    state: 'running',
    metadata: {},
    resources: { vcpus: 1, memoryMB: 512, diskMB: 1024, pids: 256 },
    createdAt: '2025-01-01T00:00:00.000Z',
    expiresAt: '2025-01-01T00:05:00.000Z',
    endedAt: null,
    errorReason: null,
    errorMessage: null,
    ...overrides,
  }
}

export function execResult(overrides: Record<string, unknown> = {}) {
  return {
    exitCode: 0,
    signal: null,
    stdout: '',
    stderr: '',
    encoding: 'base64',
    timedOut: false,
    truncated: false,
    durationMs: 5,
    ...overrides,
  }
}
