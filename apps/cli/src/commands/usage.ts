// `forkbox usage` (what a key used) and `forkbox audit` (the admin's log of who did what).
import { ForkboxClient } from '@forkbox/sdk'
import { type Command, InvalidArgumentError } from 'commander'
import type { CliContext } from '../context.ts'
import { json, table } from '../format.ts'

/** An ISO time, or a span back from now: `30m`, `6h`, `7d`. */
function parseSince(value: string, now: number): string {
  const span = /^(\d+)([mhd])$/.exec(value.trim())
  if (span) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as 'm' | 'h' | 'd']
    return new Date(now - Number(span[1]) * unit).toISOString()
  }
  if (Number.isNaN(Date.parse(value))) throw new InvalidArgumentError('expected an ISO time or a span like 30m, 6h, 7d')
  return new Date(value).toISOString()
}

const round = (n: number, digits = 1) => n.toFixed(digits)

export function registerUsage(program: Command, ctx: CliContext): void {
  program
    .command('usage')
    .description("what this key's sandboxes used: vCPU-seconds, GiB-seconds of memory, egress, snapshot storage")
    .option('--since <time>', 'from this ISO time or span back (30m, 6h, 7d)', '7d')
    .option('--until <time>', 'to this ISO time or span back (default now)')
    .option('--by <granularity>', 'hour, day or total', 'day')
    .option('--key <id>', "admin: another key's usage, or `all`")
    .option('--json', 'print JSON')
    .action(async (flags: { since: string; until?: string; by: string; key?: string; json?: boolean }) => {
      if (!['hour', 'day', 'total'].includes(flags.by)) throw new InvalidArgumentError('--by is hour, day or total')
      const now = ctx.now()
      const report = await new ForkboxClient(ctx.connection).keys.usage({
        from: parseSince(flags.since, now),
        to: flags.until ? parseSince(flags.until, now) : undefined,
        granularity: flags.by as 'hour' | 'day' | 'total',
        key: flags.key,
      })
      if (flags.json) {
        ctx.stdout.write(json(report))
        return
      }
      const row = (start: string, f: typeof report.total) => [
        start,
        round(f.sandboxSeconds / 3600, 2),
        round(f.vcpuSeconds / 3600, 2),
        round(f.memoryGiBSeconds / 3600, 2),
        String(f.egressBytes),
        round(f.snapshotGiBSeconds / 3600, 3),
      ]
      const rows = report.buckets.map((b) => row(b.start, b))
      rows.push(row('total', report.total))
      ctx.stdout.write(
        table(['FROM', 'SANDBOX-HOURS', 'VCPU-HOURS', 'GIB-HOURS', 'EGRESS-BYTES', 'SNAPSHOT-GIB-HOURS'], rows),
      )
    })

  program
    .command('audit')
    .description('the audit log (admin key): who did what, when, from where')
    .option('--since <time>', 'from this ISO time or span back (30m, 6h, 7d)', '1d')
    .option('--key <id>', "only this key's actions")
    .option('--action <name>', 'only this action (sandbox.create, key.rotate, ...)')
    .option('--json', 'print JSON lines')
    .action(async (flags: { since: string; key?: string; action?: string; json?: boolean }) => {
      const entries = new ForkboxClient(ctx.connection).keys.audit({
        from: parseSince(flags.since, ctx.now()),
        key: flags.key,
        action: flags.action,
      })
      const rows: string[][] = []
      for await (const e of entries) {
        if (flags.json) ctx.stdout.write(`${JSON.stringify(e)}\n`)
        else rows.push([e.at, e.keyId ?? '-', e.action, e.target ?? '-', String(e.status), e.ip ?? '-'])
      }
      if (!flags.json) ctx.stdout.write(table(['AT', 'KEY', 'ACTION', 'TARGET', 'STATUS', 'FROM'], rows))
    })
}
