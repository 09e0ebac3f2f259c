// Builds the `forkbox` program and runs it, turning every failure into `forkbox: CODE: message`.
import { Command, CommanderError } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import { formatError } from './cli-error.ts'
import { registerExec } from './commands/exec.ts'
import { registerFleet } from './commands/fleet.ts'
import { registerFork } from './commands/fork.ts'
import { registerHibernate } from './commands/hibernate.ts'
import { registerHosts } from './commands/hosts.ts'
import { registerKeys } from './commands/keys.ts'
import { registerKill } from './commands/kill.ts'
import { registerLs } from './commands/ls.ts'
import { registerMcp } from './commands/mcp.ts'
import { registerRun } from './commands/run.ts'
import { registerShell } from './commands/shell.ts'
import { registerSnapshot } from './commands/snapshot.ts'
import { registerTemplate } from './commands/template.ts'
import { registerUp } from './commands/up.ts'
import { registerUsage } from './commands/usage.ts'
import type { CliContext } from './context.ts'

/** Commander's `error: unknown option '-x'` as `forkbox: USAGE: unknown option '-x'`, with a hint. */
function usageLine(text: string): string {
  const message = text.trim().replace(/^error: /, '')
  const hint = message.startsWith('unknown option') ? ' (put the sandbox command after --)' : ''
  return `forkbox: USAGE: ${message}${hint}\n`
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('forkbox')
    .description('self-hosted sandboxes for running untrusted code')
    .version(pkg.version)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => write(usageLine(s)),
    })
  registerUp(program, ctx)
  registerFleet(program, ctx)
  registerHosts(program, ctx)
  registerRun(program, ctx)
  registerExec(program, ctx)
  registerShell(program, ctx)
  registerLs(program, ctx)
  registerKill(program, ctx)
  registerSnapshot(program, ctx)
  registerFork(program, ctx)
  registerHibernate(program, ctx)
  registerKeys(program, ctx)
  registerUsage(program, ctx)
  registerTemplate(program, ctx)
  registerMcp(program, ctx)
  return program
}

/** Runs the CLI on `args` (without `node` and the script) and resolves with the exit code. */
export async function runCli(args: string[], ctx: CliContext): Promise<number> {
  try {
    await buildProgram(ctx).parseAsync(args, { from: 'user' })
    return ctx.exitCode
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode
    ctx.stderr.write(`${formatError(err)}\n`)
    return 1
  }
}
