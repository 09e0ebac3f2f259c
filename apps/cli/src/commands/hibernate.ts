// `forkbox hibernate`: checkpoint and stop sandboxes; the next exec or files call wakes each.
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'

export function registerHibernate(program: Command, ctx: CliContext): void {
  program
    .command('hibernate')
    .description('checkpoint and stop a sandbox (no memory held); the next exec or files call wakes it')
    .argument('<id>', 'sandbox id')
    .action(async (id: string) => {
      const sandbox = await Sandbox.connect(id, ctx.connection)
      const info = await sandbox.hibernate()
      ctx.stdout.write(`${info.id} ${info.state}\n`)
    })
}
