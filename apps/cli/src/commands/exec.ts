// `forkbox exec`: run a command in an existing sandbox.
import { Sandbox } from '@forkbox/sdk'
import { type Command, Option } from 'commander'
import type { CliContext } from '../context.ts'
import { collectPair, parseSeconds } from '../parse.ts'
import { type CommandFlags, execAndMirror } from './exec-output.ts'

export function registerExec(program: Command, ctx: CliContext): void {
  program
    .command('exec')
    .description("run a command in a running sandbox; exits with the command's exit code")
    .argument('<id>', 'sandbox id')
    .argument('<cmd...>', "the command, after --; one word runs under bash -c, several are exec'd directly")
    .option('--timeout <seconds>', 'kill the command after this long (default 60)', parseSeconds)
    .option('--cwd <dir>', 'working directory')
    .addOption(new Option('-e, --env <KEY=VALUE>', 'environment variable (repeatable)').argParser(collectPair))
    .option('-u, --user <name>', 'user to run as')
    .option('-i, --stdin', "pass this process's stdin to the command")
    .action(async (id: string, words: string[], flags: CommandFlags) => {
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
