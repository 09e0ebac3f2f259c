// A CliContext whose edges are fakes (captured output, no real signals or host) and whose SDK
// reaches the real control plane in-process (packages/sdk/test/server.ts).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after } from 'node:test'
import { type SeenRequest, type TestServer, useTestServer } from '../../../packages/sdk/test/server.ts'
import type { CliContext, HostModule } from '../src/index.ts'
import { runCli } from '../src/index.ts'

export type { SeenRequest }

const tempDirs: string[] = []
after(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
})

export interface Harness {
  ctx: CliContext
  server: TestServer
  requests: SeenRequest[]
  stdout(): string
  stderr(): string
  stdoutBytes(): Uint8Array
  /** Fires the handlers registered through ctx.onInterrupt, as SIGINT would. */
  interrupt(): void
  configDir: string
  run(...args: string[]): Promise<number>
}

/** Call at the top of a test file: each test gets a fresh server; `harness` builds a CLI on it. */
export function useHarness(): (extra?: Partial<CliContext>) => Harness {
  const server = useTestServer()
  return (extra = {}) => harness(server(), extra)
}

function harness(server: TestServer, extra: Partial<CliContext>): Harness {
  const out: Uint8Array[] = []
  const err: Uint8Array[] = []
  const enc = new TextEncoder()
  const capture = (sink: Uint8Array[]) => ({
    write: (chunk: string | Uint8Array) => sink.push(typeof chunk === 'string' ? enc.encode(chunk) : chunk),
  })
  const handlers = new Set<() => void>()
  const configDir = mkdtempSync(join(tmpdir(), 'forkbox-cli-'))
  tempDirs.push(configDir)
  const noHost: HostModule = {
    startHost: () => Promise.reject(new Error('no host in this test')),
  }
  const ctx: CliContext = {
    stdout: capture(out),
    stderr: capture(err),
    readStdin: async () => enc.encode('from stdin'),
    connection: { ...server.conn(), maxRetries: 0 },
    configSource: { env: { XDG_CONFIG_HOME: configDir } },
    loadHost: async () => noHost,
    onInterrupt: (handler) => {
      handlers.add(handler)
      return () => handlers.delete(handler)
    },
    // a minute on, so listings read `1m ago` and `in 4m` for a 5-minute sandbox made just now
    now: () => Date.now() + 60_000,
    exitCode: 0,
    stdoutIsTerminal: true,
    ...extra,
  }
  const concat = (parts: Uint8Array[]) => Buffer.concat(parts)
  return {
    ctx,
    server,
    requests: server.requests,
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
