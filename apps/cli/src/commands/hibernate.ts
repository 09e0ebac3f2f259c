// `forkbox hibernate`: checkpoint and stop sandboxes; the next exec or files call wakes each.
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'

export function registerHibernate(program: Command, ctx: CliContext): void {
  program
    .command('hibernate')
    .description('checkpoint and stop a sandbox (no memory held); the next exec or files call wakes it')
    .argument('<id>', 'sandbox id')
    .option('--disk-only', 'keep only its disk: its processes end, and it wakes as if booted')
    .action(async (id: string, opts: { diskOnly?: boolean }) => {
      const sandbox = await Sandbox.connect(id, ctx.connection)
      const info = await sandbox.hibernate(opts.diskOnly ? { keepMemory: false } : {})
      ctx.stdout.write(`${info.id} ${info.state}\n`)
    })
}
