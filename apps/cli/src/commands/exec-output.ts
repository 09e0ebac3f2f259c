// Shared by `run` and `exec`: run one command in a sandbox and mirror its output and exit code.
import type { ExecOptions, Sandbox } from '@forkbox/sdk'
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
    throw err
  }
  ctx.stdout.write(result.stdout)
  ctx.stderr.write(result.stderr)
  if (result.timedOut) ctx.stderr.write(`forkbox: command timed out after ${flags.timeout ?? 60}s\n`)
  if (result.truncated) ctx.stderr.write('forkbox: output was truncated\n')
  ctx.exitCode = result.exitCode
}
