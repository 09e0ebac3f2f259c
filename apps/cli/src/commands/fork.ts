// `forkbox fork`: new sandboxes from a running one's live state; prints their ids.
import { Sandbox } from '@forkbox/sdk'
import { type Command, InvalidArgumentError } from 'commander'
import type { CliContext } from '../context.ts'

function parseCount(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('a whole number of at least 1')
  return n
}

export function registerFork(program: Command, ctx: CliContext): void {
  program
    .command('fork')
    .description("fork a running sandbox (memory, processes, disk); prints the forks' ids")
    .argument('<id>', 'sandbox id')
    .option('-n, --count <n>', 'how many forks (default 1)', parseCount)
    .action(async (id: string, flags: { count?: number }) => {
      const sandbox = await Sandbox.connect(id, ctx.connection)
      for (const fork of await sandbox.fork({ count: flags.count })) ctx.stdout.write(`${fork.id}\n`)
    })
}
