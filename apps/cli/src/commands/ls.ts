// `forkbox ls`: the caller's sandboxes as a table or JSON.
import { Sandbox, type SandboxState } from '@forkbox/sdk'
import { type Command, Option } from 'commander'
import type { CliContext } from '../context.ts'
import { formatPairs, json, relativeTime, table } from '../format.ts'
import { collectPair } from '../parse.ts'

interface LsFlags {
  json?: boolean
  all?: boolean
  state?: SandboxState
  metadata?: Record<string, string>
}

const states: SandboxState[] = ['starting', 'running', 'killed', 'errored', 'lost']

export function registerLs(program: Command, ctx: CliContext): void {
  program
    .command('ls')
    .description('list sandboxes (running ones unless --all or --state)')
    .option('--json', 'print JSON')
    .option('-a, --all', 'include ended sandboxes')
    .addOption(new Option('--state <state>', 'only sandboxes in this state').choices(states))
    .addOption(
      new Option('-m, --metadata <KEY=VALUE>', 'only sandboxes with this metadata (repeatable)').argParser(collectPair),
    )
    .action(async (flags: LsFlags) => {
      const state = flags.state ?? (flags.all ? undefined : 'running')
      const sandboxes = await Sandbox.list({ ...ctx.connection, state, metadata: flags.metadata })
      if (flags.json) {
        ctx.stdout.write(json(sandboxes))
        return
      }
      const now = ctx.now()
      const rows = sandboxes.map((s) => [
        s.id,
        s.template,
        s.errorReason ? `${s.state} (${s.errorReason})` : s.state,
        relativeTime(s.createdAt, now),
        s.endedAt ? '-' : relativeTime(s.expiresAt, now),
        formatPairs(s.metadata),
      ])
      ctx.stdout.write(table(['ID', 'TEMPLATE', 'STATE', 'CREATED', 'EXPIRES', 'METADATA'], rows))
    })
}
