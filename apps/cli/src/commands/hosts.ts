// `forkbox hosts`: a fleet's hosts — list, cordon, uncordon, drain (needs the admin key).
import { ForkboxClient } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'
import { json, relativeTime, table } from '../format.ts'

const GiB = 1024 ** 3

export function registerHosts(program: Command, ctx: CliContext): void {
  const hosts = program.command('hosts').description("a fleet's hosts (admin key only)")

  hosts
    .command('ls')
    .description('list hosts: state, load, capacity, version, last heartbeat')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const list = await new ForkboxClient(ctx.connection).hosts.list()
      if (flags.json) {
        ctx.stdout.write(json(list))
        return
      }
      const now = ctx.now()
      const rows = list.map((h) => [
        h.id,
        h.state,
        `${h.placed.sandboxes}/${h.capacity.maxSandboxes}`,
        `${h.capacity.vcpus}`,
        `${(h.placed.memoryMB / 1024).toFixed(1)}/${(h.capacity.memoryBytes / GiB).toFixed(1)} GiB`,
        `${(h.capacity.diskFreeBytes / GiB).toFixed(0)} GiB`,
        h.version,
        relativeTime(h.lastHeartbeatAt, now),
      ])
      ctx.stdout.write(
        table(['HOST', 'STATE', 'SANDBOXES', 'VCPUS', 'MEMORY', 'DISK FREE', 'VERSION', 'HEARTBEAT'], rows),
      )
    })

  for (const [name, what] of [
    ['cordon', 'take no new sandboxes there (what runs carries on)'],
    ['uncordon', 'take new sandboxes there again'],
  ] as const)
    hosts
      .command(name)
      .description(what)
      .argument('<host>', 'host id')
      .action(async (id: string) => {
        const h = await new ForkboxClient(ctx.connection).hosts[name](id)
        ctx.stdout.write(`${h.id}: ${h.state}\n`)
      })

  hosts
    .command('drain')
    .description('cordon the host and move everything off it: running sandboxes live, images by copy')
    .argument('<host>', 'host id')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      const r = await new ForkboxClient(ctx.connection).hosts.drain(id)
      if (flags.json) {
        ctx.stdout.write(json(r))
        return
      }
      ctx.stdout.write(`${id}: ${r.migrated.length} sandboxes moved live, ${r.moved.length} images moved\n`)
      for (const f of r.failed) ctx.stdout.write(`  not moved: ${f.id} (${f.code}: ${f.message})\n`)
      if (r.failed.length > 0) ctx.exitCode = 1
    })
}
