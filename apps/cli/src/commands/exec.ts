// `forkbox exec`: run a command in an existing sandbox.
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'
import { type CommandFlags, commandFlagOptions, execAndMirror } from './exec-output.ts'

export function registerExec(program: Command, ctx: CliContext): void {
  const cmd = program
    .command('exec')
    .description("run a command in a running sandbox; exits with the command's exit code")
    .argument('<id>', 'sandbox id')
    .argument('<cmd...>', "the command, after --; one word runs under bash -c, several are exec'd directly")
  for (const option of commandFlagOptions()) cmd.addOption(option)
  cmd.action(async (id: string, words: string[], flags: CommandFlags) => {
    const controller = new AbortController()
    const unsubscribe = ctx.onInterrupt(() => controller.abort())
    try {
      const sandbox = await Sandbox.connect(id, { ...ctx.connection, signal: controller.signal })
      await execAndMirror(ctx, sandbox, words, flags, controller.signal)
    } catch (err) {
      if (!controller.signal.aborted) throw err
      ctx.exitCode = 130
    } finally {
      unsubscribe()
    }
  })
}
