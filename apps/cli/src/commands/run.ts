// `forkbox run`: a throwaway sandbox for one command; it is killed whatever happens.

import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import { formatError } from '../cli-error.ts'
import type { CliContext } from '../context.ts'
import { type CommandFlags, commandFlagOptions, execAndMirror } from './exec-output.ts'

interface RunFlags extends CommandFlags {
  template?: string
}

// The sandbox must outlive the command it runs by a margin for create and teardown.
const TTL_MARGIN_SECONDS = 60
const DEFAULT_TTL_SECONDS = 300

export function registerRun(program: Command, ctx: CliContext): void {
  const cmd = program
    .command('run')
    .description("run a command in a new sandbox, then kill it; exits with the command's exit code")
    .argument('<cmd...>', "the command; one word runs under bash -c, several are exec'd directly")
    .option('-t, --template <name>', 'template to create the sandbox from')
  for (const option of commandFlagOptions()) cmd.addOption(option)
  cmd.action(async (words: string[], flags: RunFlags) => {
    const controller = new AbortController()
    const unsubscribe = ctx.onInterrupt(() => controller.abort())
    try {
      const ttlSeconds = Math.max(DEFAULT_TTL_SECONDS, Math.ceil((flags.timeout ?? 0) + TTL_MARGIN_SECONDS))
      // Not aborted by Ctrl-C: an abandoned create would leave a sandbox we could not kill.
      const sandbox = await Sandbox.create({ ...ctx.connection, template: flags.template, ttlSeconds })
      try {
        if (controller.signal.aborted) ctx.exitCode = 130
        else await execAndMirror(ctx, sandbox, words, flags, controller.signal)
      } finally {
        await sandbox.kill().catch((err: unknown) => {
          ctx.stderr.write(`${formatError(err)} (while killing ${sandbox.id})\n`)
        })
      }
    } finally {
      unsubscribe()
    }
  })
}
