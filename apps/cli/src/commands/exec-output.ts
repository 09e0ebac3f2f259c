// Shared by `run` and `exec`: run one command in a sandbox and mirror its output and exit code.
import type { ExecOptions, Sandbox } from '@forkbox/sdk'
import type { CliContext } from '../context.ts'
import { commandFrom } from '../parse.ts'

export interface CommandFlags {
  timeout?: number
  cwd?: string
  env?: Record<string, string>
  user?: string
  stdin?: boolean
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
