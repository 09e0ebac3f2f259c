// Shared by `run` and `exec`: run one command in a sandbox and mirror its output and exit code.
import { type ExecOptions, ForkboxError, type Sandbox } from '@forkbox/sdk'
import { Option } from 'commander'
import type { CliContext } from '../context.ts'
import { collectPair, commandFrom, parseSeconds } from '../parse.ts'

export interface CommandFlags {
  timeout?: number
  cwd?: string
  env?: Record<string, string>
  user?: string
  stdin?: boolean
}

/** The flags `run` and `exec` share, matching `CommandFlags`. */
export function commandFlagOptions(): Option[] {
  return [
    new Option('--timeout <seconds>', 'kill the command after this long (default 60)').argParser(parseSeconds),
    new Option('--cwd <dir>', 'working directory'),
    new Option('-e, --env <KEY=VALUE>', 'environment variable (repeatable)').argParser(collectPair),
    new Option('-u, --user <name>', 'user to run as'),
    new Option('-i, --stdin', "pass this process's stdin to the command"),
  ]
}

/** Runs `words` in `sandbox`, writes stdout/stderr raw, and sets the exit code (130 when interrupted). */
export async function execAndMirror(
  ctx: CliContext,
  sandbox: Sandbox,
  words: string[],
  flags: CommandFlags,
  signal: AbortSignal,
): Promise<void> {
  const options: ExecOptions = {
    timeoutSeconds: flags.timeout,
    cwd: flags.cwd,
    env: flags.env,
    user: flags.user,
    signal,
  }
  if (flags.stdin) options.stdin = await ctx.readStdin()
  let result: Awaited<ReturnType<Sandbox['execBytes']>>
  try {
    result = await sandbox.execBytes(commandFrom(words), options)
  } catch (err) {
    if (signal.aborted) {
      ctx.exitCode = 130
      return
    }
    if (!(err instanceof ForkboxError && err.code === 'EXEC_TIMEOUT')) throw err
    // killed at its timeout: what it wrote until then (base64 in the error's details), then why it
    // stopped, and timeout(1)'s exit code
    for (const [field, out] of [
      ['stdout', ctx.stdout],
      ['stderr', ctx.stderr],
    ] as const) {
      const text = err.details?.[field]
      if (typeof text === 'string') out.write(Buffer.from(text, 'base64'))
    }
    ctx.stderr.write(`forkbox: command timed out after ${flags.timeout ?? 60}s and was killed\n`)
    ctx.exitCode = 124
    return
  }
  ctx.stdout.write(result.stdout)
  ctx.stderr.write(result.stderr)
  if (result.truncated) ctx.stderr.write('forkbox: output was truncated\n')
  ctx.exitCode = result.exitCode
}
