// `forkbox kill`: kill sandboxes by id; one failure does not stop the rest.
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import { formatError } from '../cli-error.ts'
import type { CliContext } from '../context.ts'

export function registerKill(program: Command, ctx: CliContext): void {
  program
    .command('kill')
    .description('kill sandboxes')
    .argument('<id...>', 'sandbox ids')
    .action(async (ids: string[]) => {
      for (const id of ids) {
        try {
          await Sandbox.kill(id, ctx.connection)
          ctx.stdout.write(`${id}\n`)
        } catch (err) {
          ctx.stderr.write(`${formatError(err)}\n`)
          ctx.exitCode = 1
        }
      }
    })
}
