// `forkbox snapshot`: keep a running sandbox's live state; prints the snapshot id.
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'

export function registerSnapshot(program: Command, ctx: CliContext): void {
  program
    .command('snapshot')
    .description("snapshot a running sandbox's memory, processes and disk; prints the snapshot id")
    .argument('<id>', 'sandbox id')
    .action(async (id: string) => {
      const sandbox = await Sandbox.connect(id, ctx.connection)
      const snap = await sandbox.snapshot()
      ctx.stdout.write(`${snap.id}\n`)
    })
}
