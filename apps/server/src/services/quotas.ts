// A key's scopes and quotas, checked before anything is made for it: what it asks for plus what
// it holds must stay within its quotas, or the call fails (QUOTA_EXCEEDED, naming the quota) and
// nothing is made. Checks and the records they admit are serialized per key in this replica (a
// reservation holds what was admitted until its record counts in the store).
import {
  AppError,
  type KeyQuotas,
  type KeyScopes,
  type NetworkPolicy,
  type QuotaName,
  type ResolvedResources,
} from '@forkbox/protocol'
import type { Db } from '../store/db.ts'
import type { KeyStore } from '../store/keys.ts'
import type { SnapshotStore } from '../store/snapshots.ts'
import type { TemplateStore } from '../store/templates.ts'

/** What a call would add to what its key holds. */
export interface Ask {
  sandboxes?: number
  vcpus?: number
  memoryMB?: number
  diskMB?: number
}

type Held = Required<Ask>

const NONE: Held = { sandboxes: 0, vcpus: 0, memoryMB: 0, diskMB: 0 }

export class QuotaGuard {
  private readonly reserved = new Map<string, Held[]>()
  private readonly locks = new Map<string, Promise<unknown>>()

  constructor(
    private readonly db: Db,
    private readonly keys: KeyStore,
    private readonly snapshots: SnapshotStore,
    private readonly templates: TemplateStore,
  ) {}

  /** The key's scopes and quotas (a key that is gone has none: its calls fail on auth first). */
  private async limitsOf(owner: string): Promise<{ scopes: KeyScopes; quotas: KeyQuotas }> {
    const key = await this.keys.get(owner).catch(() => null)
    return { scopes: key?.scopes ?? {}, quotas: key?.quotas ?? {} }
  }

  /** Refuses what the key's scopes forbid: a template it may not use, a network it may not have. */
  async checkScopes(owner: string, want: { template?: string; network?: NetworkPolicy }): Promise<void> {
    const { scopes } = await this.limitsOf(owner)
    checkScopes(scopes, want)
  }

  /**
   * Admits `ask` for `owner` and runs `record` (which makes it count in the store) before any other
   * check of the same key here; QUOTA_EXCEEDED when a quota would be passed.
   */
  async admit<T>(owner: string, ask: Ask, record: () => Promise<T>): Promise<T> {
    const held = { ...NONE, ...ask }
    const release = await this.serialized(owner, async () => {
      const { quotas } = await this.limitsOf(owner)
      if (Object.keys(quotas).length > 0) {
        const used = await this.used(owner)
        for (const r of this.reserved.get(owner) ?? []) add(used, r)
        checkQuotas(quotas, used, held)
      }
      const list = this.reserved.get(owner) ?? []
      list.push(held)
      this.reserved.set(owner, list)
      return () => {
        const l = this.reserved.get(owner) ?? []
        l.splice(l.indexOf(held), 1)
        if (l.length === 0) this.reserved.delete(owner)
      }
    })
    try {
      return await record()
    } finally {
      release()
    }
  }

  /** Refuses a snapshot when the key's snapshots already take its quota, or would with `adding`. */
  checkSnapshotBytes(owner: string, adding = 0): Promise<void> {
    return this.checkBytes(owner, 'snapshotBytes', () => this.snapshots.bytesOf(owner), adding)
  }

  /**
   * Refuses a build (`adding` 0: before it starts) when the key's templates already take its
   * templateBytes quota, or would with the `adding` bytes of the build just made.
   */
  checkTemplateBytes(owner: string, adding = 0): Promise<void> {
    return this.checkBytes(owner, 'templateBytes', () => this.templates.bytesOf(owner), adding)
  }

  /** The key's templateBytes quota and what its templates leave of it now; null when it has none. */
  async templateBytesRoom(owner: string): Promise<{ limitBytes: number; leftBytes: number } | null> {
    const limit = (await this.limitsOf(owner)).quotas.templateBytes
    if (limit === undefined) return null
    return { limitBytes: limit, leftBytes: Math.max(0, limit - (await this.templates.bytesOf(owner))) }
  }

  /** A bytes quota: refused when what the key holds takes it (`adding` 0), or would with `adding` more. */
  private async checkBytes(
    owner: string,
    quota: 'snapshotBytes' | 'templateBytes',
    held: () => Promise<number>,
    adding: number,
  ): Promise<void> {
    const limit = (await this.limitsOf(owner)).quotas[quota]
    if (limit === undefined) return
    const used = await held()
    if (used + adding > limit || (adding === 0 && used >= limit)) throw exceeded(quota, limit, used, adding)
  }

  /** Refuses a build when the key has its quota of builds queued or running, or its templates take their bytes. */
  async checkBuilds(owner: string): Promise<void> {
    await this.checkTemplateBytes(owner)
    const { quotas } = await this.limitsOf(owner)
    if (quotas.concurrentBuilds === undefined) return
    const r = await this.db
      .selectFrom('template_builds')
      .innerJoin('templates', 'templates.id', 'template_builds.template_id')
      .select((e) => e.fn.countAll<number>().as('n'))
      .where('templates.owner', '=', owner)
      .where('template_builds.status', 'in', ['waiting', 'queued', 'building'])
      .executeTakeFirstOrThrow()
    const used = Number(r.n)
    if (used + 1 > quotas.concurrentBuilds) throw exceeded('concurrentBuilds', quotas.concurrentBuilds, used, 1)
  }

  /** What the key's sandboxes hold now: live ones their vCPUs and memory, hibernated ones their disk too. */
  private async used(owner: string): Promise<Held> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select(['state', 'resources'])
      .where('owner', '=', owner)
      .where('state', 'in', ['starting', 'running', 'hibernated'])
      .execute()
    const used = { ...NONE }
    for (const r of rows) {
      const res = JSON.parse(r.resources) as ResolvedResources
      used.diskMB += res.diskMB
      if (r.state === 'hibernated') continue
      used.sandboxes += 1
      used.vcpus += res.vcpus
      used.memoryMB += res.memoryMB
    }
    return used
  }

  private async serialized<T>(owner: string, fn: () => Promise<T>): Promise<T> {
    const before = this.locks.get(owner) ?? Promise.resolve()
    const run = before.then(fn, fn)
    const tail = run.catch(() => {})
    this.locks.set(owner, tail)
    try {
      return await run
    } finally {
      if (this.locks.get(owner) === tail) this.locks.delete(owner)
    }
  }
}

function add(into: Held, h: Held): void {
  into.sandboxes += h.sandboxes
  into.vcpus += h.vcpus
  into.memoryMB += h.memoryMB
  into.diskMB += h.diskMB
}

const UNITS: Partial<Record<QuotaName, string>> = {
  memoryMB: ' MB',
  diskMB: ' MB',
  snapshotBytes: ' bytes',
  templateBytes: ' bytes',
}

function exceeded(quota: QuotaName, limit: number, used: number, asked: number): AppError {
  const u = UNITS[quota] ?? ''
  return new AppError(
    'QUOTA_EXCEEDED',
    `this key's ${quota} quota is ${limit}${u}: it holds ${used}${u} and this asks for ${asked}${u} more`,
    { quota, limit, used, asked },
  )
}

/** The first quota `ask` would pass on top of `used`, as QUOTA_EXCEEDED. */
export function checkQuotas(quotas: KeyQuotas, used: Held, ask: Held): void {
  for (const q of ['sandboxes', 'vcpus', 'memoryMB', 'diskMB'] as const) {
    const limit = quotas[q]
    if (limit !== undefined && ask[q] > 0 && used[q] + ask[q] > limit) throw exceeded(q, limit, used[q], ask[q])
  }
}

/** FORBIDDEN when the scopes rule out the template or the network asked for. */
export function checkScopes(scopes: KeyScopes, want: { template?: string; network?: NetworkPolicy }): void {
  if (want.template !== undefined && scopes.templates) {
    const name = want.template.split('@')[0] ?? want.template
    if (!scopes.templates.includes(want.template) && !scopes.templates.includes(name))
      throw new AppError('FORBIDDEN', `this key may only use the templates ${scopes.templates.join(', ')}`, {
        scope: 'templates',
      })
  }
  const n = want.network
  if (scopes.noNetwork && n && (n.internet || n.allowOut.length > 0 || n.ports.length > 0))
    throw new AppError('FORBIDDEN', 'this key may only make sandboxes with no network (no internet, egress or ports)', {
      scope: 'noNetwork',
    })
}
