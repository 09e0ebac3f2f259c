// `forkbox keys`: API keys (the admin key; `show me` and `rotate me` for any key): create, list,
// show, set quotas, rate limits, scopes and expiry, rotate, revoke.
import type { ApiKeyInfo, KeyQuotas, KeyRateLimits, KeyScopes } from '@forkbox/sdk'
import { ForkboxClient } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'
import { json, relativeTime, table } from '../format.ts'
import { parseCount, parseList, parseRate, parseSeconds } from '../parse.ts'

interface LimitFlags {
  sandboxes?: number
  vcpus?: number
  memoryMb?: number
  diskMb?: number
  snapshotBytes?: number
  templateBytes?: number
  builds?: number
  createRate?: { perSecond: number; burst: number }
  dataRate?: { perSecond: number; burst: number }
  readOnly?: boolean
  noNetwork?: boolean
  templates?: string[]
}

/** The quota, rate limit and scope options `create` and `set` share. */
function limitOptions(cmd: Command): Command {
  return cmd
    .option('--sandboxes <n>', 'quota: live sandboxes at once', parseCount)
    .option('--vcpus <n>', 'quota: vCPUs of its live sandboxes together', parseCount)
    .option('--memory-mb <n>', 'quota: memory of its live sandboxes together (MB)', parseCount)
    .option('--disk-mb <n>', 'quota: disk of its live and hibernated sandboxes together (MB)', parseCount)
    .option('--snapshot-bytes <n>', 'quota: bytes of its snapshots', parseCount)
    .option('--template-bytes <n>', 'quota: bytes its templates take on disk', parseCount)
    .option('--builds <n>', 'quota: template builds at once', parseCount)
    .option('--create-rate <perSecond/burst>', 'rate limit of creates (sandboxes, forks, snapshots, builds)', parseRate)
    .option('--data-rate <perSecond/burst>', 'rate limit of every other call', parseRate)
    .option('--read-only', 'scope: only reads')
    .option('--no-network', 'scope: sandboxes with no network at all')
    .option('--templates <names>', 'scope: only these templates (comma-separated)', parseList)
}

function quotasOf(f: LimitFlags): KeyQuotas {
  const q: KeyQuotas = {}
  if (f.sandboxes !== undefined) q.sandboxes = f.sandboxes
  if (f.vcpus !== undefined) q.vcpus = f.vcpus
  if (f.memoryMb !== undefined) q.memoryMB = f.memoryMb
  if (f.diskMb !== undefined) q.diskMB = f.diskMb
  if (f.snapshotBytes !== undefined) q.snapshotBytes = f.snapshotBytes
  if (f.templateBytes !== undefined) q.templateBytes = f.templateBytes
  if (f.builds !== undefined) q.concurrentBuilds = f.builds
  return q
}

function ratesOf(f: LimitFlags): KeyRateLimits {
  return { ...(f.createRate && { create: f.createRate }), ...(f.dataRate && { data: f.dataRate }) }
}

function scopesOf(f: LimitFlags): KeyScopes {
  // commander's --no-network sets network: false
  const noNetwork = (f as { network?: boolean }).network === false
  return {
    ...(f.readOnly && { readOnly: true }),
    ...(noNetwork && { noNetwork: true }),
    ...(f.templates && { templates: f.templates }),
  }
}

const some = (o: object) => Object.keys(o).length > 0

function describeKey(k: ApiKeyInfo, now: number): string {
  const quotas = Object.entries(k.quotas).map(([q, v]) => `${q}=${v}`)
  const rates = Object.entries(k.rateLimits).map(([c, r]) => `${c}=${r.perSecond}/s burst ${r.burst}`)
  const scopes = [
    k.scopes.readOnly && 'read-only',
    k.scopes.noNetwork && 'no network',
    k.scopes.templates && `templates ${k.scopes.templates.join(',')}`,
  ].filter(Boolean)
  return [
    `id        ${k.id} (${k.name}${k.admin ? ', admin' : ''})`,
    `prefix    ${k.prefix}`,
    `created   ${relativeTime(k.createdAt, now)}`,
    `expires   ${k.expiresAt ? relativeTime(k.expiresAt, now) : 'never'}`,
    ...(k.previousSecretExpiresAt ? [`old secret valid until ${relativeTime(k.previousSecretExpiresAt, now)}`] : []),
    ...(k.revokedAt ? [`revoked   ${relativeTime(k.revokedAt, now)}`] : []),
    `scopes    ${scopes.length > 0 ? scopes.join('; ') : 'all'}`,
    `quotas    ${quotas.length > 0 ? quotas.join(' ') : 'none'}`,
    `rates     ${rates.length > 0 ? rates.join('; ') : "the server's defaults"}`,
  ].join('\n')
}

export function registerKeys(program: Command, ctx: CliContext): void {
  const keys = program.command('keys').description('manage API keys (admin key; `show me`, `rotate me` for any key)')

  limitOptions(
    keys
      .command('create')
      .description('create a key and print its secret (shown only this once)')
      .argument('<name>', 'a name to recognise the key by')
      .option('--e2b', 'issue it as e2b_<hex>, for the E2B clients (docs/e2b.md)')
      .option('--ttl <seconds>', 'the key is refused after this long', parseSeconds),
  ).action(async (name: string, flags: LimitFlags & { e2b?: boolean; ttl?: number }) => {
    const [scopes, quotas, rateLimits] = [scopesOf(flags), quotasOf(flags), ratesOf(flags)]
    const created = await new ForkboxClient(ctx.connection).keys.create(name, {
      ...(flags.e2b && { format: 'e2b' }),
      ...(some(scopes) && { scopes }),
      ...(some(quotas) && { quotas }),
      ...(some(rateLimits) && { rateLimits }),
      ...(flags.ttl && { ttlSeconds: Math.round(flags.ttl) }),
    })
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
        k.expiresAt ? relativeTime(k.expiresAt, now) : '-',
        k.revokedAt ? relativeTime(k.revokedAt, now) : '-',
      ])
      ctx.stdout.write(table(['ID', 'NAME', 'PREFIX', 'CREATED', 'EXPIRES', 'REVOKED'], rows))
    })

  keys
    .command('show')
    .description("a key's scopes, quotas, rate limits and expiry")
    .argument('<id>', 'key id, or `me`')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      const k = await new ForkboxClient(ctx.connection).keys.get(id)
      ctx.stdout.write(flags.json ? json(k) : `${describeKey(k, ctx.now())}\n`)
    })

  limitOptions(
    keys
      .command('set')
      .description("change a key's quotas, rate limits, scopes or expiry (each kind given replaces what it had)")
      .argument('<id>', 'key id')
      .option('--clear-quotas', 'remove every quota')
      .option('--clear-rates', "back to the server's rate limits")
      .option('--clear-scopes', 'remove every scope')
      .option('--expires-in <seconds>', 'the key is refused after this long from now', parseSeconds)
      .option('--no-expiry', 'the key never expires'),
  ).action(
    async (
      id: string,
      flags: LimitFlags & {
        clearQuotas?: boolean
        clearRates?: boolean
        clearScopes?: boolean
        expiresIn?: number
        expiry?: boolean
      },
    ) => {
      const quotas = quotasOf(flags)
      const rates = ratesOf(flags)
      const scopes = scopesOf(flags)
      const k = await new ForkboxClient(ctx.connection).keys.update(id, {
        ...((some(quotas) || flags.clearQuotas) && { quotas }),
        ...((some(rates) || flags.clearRates) && { rateLimits: rates }),
        ...((some(scopes) || flags.clearScopes) && { scopes }),
        ...(flags.expiresIn && { expiresAt: new Date(ctx.now() + flags.expiresIn * 1000) }),
        ...(flags.expiry === false && { expiresAt: null }),
      })
      ctx.stdout.write(`${describeKey(k, ctx.now())}\n`)
    },
  )

  keys
    .command('rotate')
    .description('give a key a new secret (printed, shown only this once); the old one works for the grace')
    .argument('<id>', 'key id, or `me`')
    .option('--grace <seconds>', 'how long the old secret still works (default 3600)', parseSeconds)
    .action(async (id: string, flags: { grace?: number }) => {
      const rotated = await new ForkboxClient(ctx.connection).keys.rotate(id, {
        ...(flags.grace !== undefined && { graceSeconds: Math.round(flags.grace) }),
      })
      ctx.stdout.write(`${rotated.key}\n`)
      const until = rotated.previousSecretExpiresAt
      ctx.stderr.write(
        `rotated ${rotated.id}; ${until ? `the old secret works until ${until}` : 'the old secret no longer works'}\n`,
      )
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
