// What commands touch outside themselves (streams, signals, the SDK connection, the host
// module), gathered in one object so tests can swap each edge.
import { Buffer } from 'node:buffer'
import type { ConfigSourceOptions, ConnectionOptions } from '@forkbox/sdk'
import { type HostModule, importHost } from './host.ts'
import { keepServingOnUncaught, SUPERVISED_ENV, stopWithSupervisor, supervise } from './supervisor.ts'

export interface Output {
  write(chunk: string | Uint8Array): unknown
}

export interface CliContext {
  stdout: Output
  stderr: Output
  /** Where progress bars draw; present only when stderr is a terminal. */
  progressStream?: NodeJS.WriteStream
  readStdin(): Promise<Uint8Array>
  /** Passed to every SDK call; empty means the SDK's own resolution (env, credentials file). */
  connection: ConnectionOptions
  /** Where `up` writes credentials; empty means the SDK's default location. */
  configSource: ConfigSourceOptions
  loadHost(): Promise<HostModule>
  /** Calls `handler` on the first SIGINT/SIGTERM; a second one exits at once. Returns an unsubscribe. */
  onInterrupt(handler: () => void): () => void
  now(): number
  /** The process exit code a command asks for when it finishes normally. */
  exitCode: number
  /** Whether stdout is a terminal (a secret is shown only there, never into a log file). */
  stdoutIsTerminal: boolean
  /** How `up` keeps the host alive; absent in tests (the host then runs in this process, unsupervised). */
  supervisor?: {
    /** This process is the supervised host. */
    inChild: boolean
    /** Runs the host in a child process, started again if it dies; resolves with the exit code. */
    run(): Promise<number>
    /** In the host process: errors nothing caught are logged, and it keeps serving. */
    lastResort(): void
    /** In the host process: calls `onGone` once the supervisor has died. */
    onSupervisorGone(onGone: () => void): void
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Uint8Array> {
  const chunks: Uint8Array[] = []
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk)
  return Buffer.concat(chunks)
}

function onProcessInterrupt(handler: () => void): () => void {
  let count = 0
  const listener = () => {
    count++
    if (count > 1) process.exit(130)
    handler()
  }
  process.on('SIGINT', listener)
  process.on('SIGTERM', listener)
  return () => {
    process.off('SIGINT', listener)
    process.off('SIGTERM', listener)
  }
}

export function processContext(): CliContext {
  const inChild = process.env[SUPERVISED_ENV] === '1'
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    progressStream: process.stderr.isTTY ? process.stderr : undefined,
    readStdin: () => readAll(process.stdin),
    connection: {},
    configSource: {},
    loadHost: importHost,
    onInterrupt: onProcessInterrupt,
    now: () => Date.now(),
    exitCode: 0,
    stdoutIsTerminal: process.stdout.isTTY === true,
    supervisor: {
      inChild,
      run: () =>
        supervise({
          argv: [...process.execArgv, ...process.argv.slice(1)],
          log: (line) => process.stderr.write(`${line}\n`),
        }),
      lastResort: () => keepServingOnUncaught((line) => process.stderr.write(`${line}\n`)),
      onSupervisorGone: (onGone) => {
        if (inChild) stopWithSupervisor(onGone)
      },
    },
  }
}
