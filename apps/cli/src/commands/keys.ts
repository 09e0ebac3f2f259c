// `forkbox keys`: create, list and revoke API keys (needs the admin key).
import { ForkboxClient } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'
import { json, relativeTime, table } from '../format.ts'

export function registerKeys(program: Command, ctx: CliContext): void {
  const keys = program.command('keys').description('manage API keys (admin key only)')

  keys
    .command('create')
    .description('create a key and print its secret (shown only this once)')
    .argument('<name>', 'a name to recognise the key by')
    .option('--e2b', 'issue it as e2b_<hex>, for the E2B clients (docs/e2b.md)')
    .action(async (name: string, flags: { e2b?: boolean }) => {
      const created = await new ForkboxClient(ctx.connection).keys.create(name, flags.e2b ? { format: 'e2b' } : {})
      ctx.stdout.write(`${created.key}\n`)
      ctx.stderr.write(`created key ${created.id} (${created.name}); store the secret now, it is not shown again\n`)
    })

  keys
    .command('list')
    .description('list keys')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const list = await new ForkboxClient(ctx.connection).keys.list()
      if (flags.json) {
        ctx.stdout.write(json(list))
        return
      }
      const now = ctx.now()
      const rows = list.map((k) => [
        k.id,
        k.name,
        k.prefix,
        relativeTime(k.createdAt, now),
        k.revokedAt ? relativeTime(k.revokedAt, now) : '-',
      ])
      ctx.stdout.write(table(['ID', 'NAME', 'PREFIX', 'CREATED', 'REVOKED'], rows))
    })

  keys
    .command('revoke')
    .description('revoke a key')
    .argument('<id>', 'key id')
    .action(async (id: string) => {
      await new ForkboxClient(ctx.connection).keys.revoke(id)
      ctx.stdout.write(`revoked ${id}\n`)
    })
}
