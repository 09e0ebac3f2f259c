// Templates users build: who owns each name, its builds (one version each) and their logs. The
// agent holds the artifacts, under each build's agent name.
import type {
  BuildLogEntry,
  BuildLogLine,
  TemplateBuild,
  TemplateBuildSpec,
  TemplateBuildStatus,
} from '@forkbox/protocol'
import { sql } from 'kysely'
import type { Db } from './db.ts'

interface TemplateRow {
  id: string
  owner: string
  name: string
  description: string
  public: number
  created_at: string
  deleted_at: string | null
  published_build: string | null
}

interface BuildRow {
  id: string
  template_id: string
  version: number
  status: TemplateBuildStatus
  spec: string
  error_code: string | null
  error_message: string | null
  created_at: string
  finished_at: string | null
}

export interface TemplateRecord {
  id: string
  owner: string
  name: string
  description: string
  public: boolean
  /** The build the admin approved: what every other key gets of it (null: not public). */
  publishedBuild: string | null
  createdAt: string
}

export interface BuildRecord extends TemplateBuild {
  spec: TemplateBuildSpec
}

function toTemplate(r: TemplateRow): TemplateRecord {
  return {
    id: r.id,
    owner: r.owner,
    name: r.name,
    description: r.description,
    public: Number(r.public) === 1 && r.published_build !== null,
    publishedBuild: Number(r.public) === 1 ? r.published_build : null,
    createdAt: r.created_at,
  }
}

/** The agent's name for a template's build: unique, never reused, `[a-z0-9-]`. */
export function agentName(templateId: string, version: number): string {
  return `u-${templateId.replace(/^tpl-/, '')}-${version}`
}

export class TemplateStore {
  constructor(private readonly db: Db) {}

  private build(r: BuildRow, name: string): BuildRecord {
    return {
      id: r.id,
      templateId: r.template_id,
      template: name,
      version: r.version,
      status: r.status,
      error: r.error_code ? { code: r.error_code, message: r.error_message ?? '' } : null,
      createdAt: r.created_at,
      finishedAt: r.finished_at,
      spec: JSON.parse(r.spec) as TemplateBuildSpec,
    }
  }

  /** The owner's live template named `name`, or null. */
  async byName(owner: string, name: string): Promise<TemplateRecord | null> {
    const row = await this.live().where('owner', '=', owner).where('name', '=', name).executeTakeFirst()
    return row ? toTemplate(row) : null
  }

  /** A public live template named `name` (names of public templates are unique), or null. */
  async publicByName(name: string): Promise<TemplateRecord | null> {
    const row = await this.live()
      .where('name', '=', name)
      .where('public', '=', 1)
      .where('published_build', 'is not', null)
      .executeTakeFirst()
    return row ? toTemplate(row) : null
  }

  async get(id: string): Promise<TemplateRecord | null> {
    const row = await this.live().where('id', '=', id).executeTakeFirst()
    return row ? toTemplate(row) : null
  }

  /** The owner's live templates and every public one. */
  async visible(owner: string): Promise<TemplateRecord[]> {
    const rows = await this.live()
      .where((e) => e.or([e('owner', '=', owner), e.and([e('public', '=', 1), e('published_build', 'is not', null)])]))
      .orderBy('name')
      .orderBy('id')
      .execute()
    return rows.map(toTemplate)
  }

  private live() {
    return this.db.selectFrom('templates').selectAll().where('deleted_at', 'is', null)
  }

  async insertTemplate(t: Omit<TemplateRecord, 'createdAt' | 'public' | 'publishedBuild'>): Promise<TemplateRecord> {
    const createdAt = new Date().toISOString()
    await this.db
      .insertInto('templates')
      .values({ id: t.id, owner: t.owner, name: t.name, description: t.description, created_at: createdAt })
      .execute()
    return { ...t, public: false, publishedBuild: null, createdAt }
  }

  /** Publishes build `buildId` of template `id` (the one other keys get), or makes it private (null). */
  async setPublished(id: string, buildId: string | null): Promise<void> {
    await this.db
      .updateTable('templates')
      .set({ public: buildId ? 1 : 0, published_build: buildId })
      .where('id', '=', id)
      .execute()
  }

  async markDeleted(id: string): Promise<void> {
    await this.db.updateTable('templates').set({ deleted_at: new Date().toISOString() }).where('id', '=', id).execute()
  }

  /** A new build of template `t`, with the next version number (the unique version index settles a race). */
  async insertBuild(
    t: TemplateRecord,
    id: string,
    status: TemplateBuildStatus,
    spec: (version: number) => TemplateBuildSpec,
  ): Promise<BuildRecord> {
    await this.db.transaction().execute(async (trx) => {
      const { v } = await trx
        .selectFrom('template_builds')
        .select((e) => sql<number>`coalesce(max(${e.ref('version')}), 0) + 1`.as('v'))
        .where('template_id', '=', t.id)
        .executeTakeFirstOrThrow()
      const version = Number(v)
      await trx
        .insertInto('template_builds')
        .values({
          id,
          template_id: t.id,
          version,
          status,
          spec: JSON.stringify(spec(version)),
          created_at: new Date().toISOString(),
        })
        .execute()
    })
    return (await this.getBuild(id)) as BuildRecord
  }

  async getBuild(id: string): Promise<BuildRecord | null> {
    const row = await this.db
      .selectFrom('template_builds as b')
      .innerJoin('templates as t', 't.id', 'b.template_id')
      .selectAll('b')
      .select('t.name as template_name')
      .where('b.id', '=', id)
      .executeTakeFirst()
    return row ? this.build(row as BuildRow, row.template_name) : null
  }

  async builds(t: TemplateRecord): Promise<BuildRecord[]> {
    const rows = await this.db
      .selectFrom('template_builds')
      .selectAll()
      .where('template_id', '=', t.id)
      .orderBy('version', 'desc')
      .execute()
    return rows.map((r) => this.build(r as BuildRow, t.name))
  }

  /** The ready build of `t` at `version`, or its newest ready one. */
  async readyBuild(t: TemplateRecord, version?: number): Promise<BuildRecord | null> {
    let q = this.db
      .selectFrom('template_builds')
      .selectAll()
      .where('template_id', '=', t.id)
      .where('status', '=', 'ready')
    q = version === undefined ? q.orderBy('version', 'desc').limit(1) : q.where('version', '=', version)
    const row = await q.executeTakeFirst()
    return row ? this.build(row as BuildRow, t.name) : null
  }

  /**
   * Ready builds whose artifacts the agent still has: those of live templates, and those of
   * deleted ones not removed yet (sandboxes or snapshots still started from them).
   */
  async readySpecs(): Promise<{ id: string; spec: TemplateBuildSpec; deleted: boolean }[]> {
    const rows = await this.db
      .selectFrom('template_builds as b')
      .innerJoin('templates as t', 't.id', 'b.template_id')
      .select(['b.id', 'b.spec', 't.deleted_at'])
      .where('b.status', '=', 'ready')
      .where('b.removed', '=', 0)
      .execute()
    return rows.map((r) => ({
      id: r.id,
      spec: JSON.parse(r.spec) as TemplateBuildSpec,
      deleted: r.deleted_at !== null,
    }))
  }

  /** The build's artifacts are gone from the agent. */
  async markRemoved(id: string): Promise<void> {
    await this.db.updateTable('template_builds').set({ removed: 1 }).where('id', '=', id).execute()
  }

  /** How a user's build is shown to users (`name@version`); null for a name that is no build's. */
  async labelOf(agentName: string): Promise<string | null> {
    const m = /^u-([0-9a-f]+)-(\d+)$/.exec(agentName)
    if (!m) return null
    const row = await this.db.selectFrom('templates').select('name').where('id', '=', `tpl-${m[1]}`).executeTakeFirst()
    return row ? `${row.name}@${m[2]}` : null
  }

  /** Whether `name` is the agent name of some user's build (never creatable by its name alone). */
  async isAgentName(name: string): Promise<boolean> {
    const m = /^u-([0-9a-f]+)-(\d+)$/.exec(name)
    if (!m) return false
    const row = await this.db.selectFrom('templates').select('id').where('id', '=', `tpl-${m[1]}`).executeTakeFirst()
    return row !== undefined
  }

  /** Moves a build on; `from` guards against a race (a build failed at restart is not then marked ready). */
  async transition(
    id: string,
    from: TemplateBuildStatus[],
    to: TemplateBuildStatus,
    extra: { error?: { code: string; message: string }; spec?: TemplateBuildSpec; sizeBytes?: number } = {},
  ): Promise<boolean> {
    const done = to === 'ready' || to === 'failed'
    const r = await this.db
      .updateTable('template_builds')
      .set((e) => ({
        status: to,
        error_code: e.fn.coalesce(sql.val(extra.error?.code ?? null), e.ref('error_code')),
        error_message: e.fn.coalesce(sql.val(extra.error?.message ?? null), e.ref('error_message')),
        spec: extra.spec ? JSON.stringify(extra.spec) : e.ref('spec'),
        size_bytes: extra.sizeBytes ?? e.ref('size_bytes'),
        ...(done ? { finished_at: new Date().toISOString() } : {}),
      }))
      .where('id', '=', id)
      .where('status', 'in', from)
      .executeTakeFirst()
    return Number(r.numUpdatedRows) > 0
  }

  /** Bytes the owner's ready builds take (those of deleted templates and removed builds are gone). */
  async bytesOf(owner: string): Promise<number> {
    const r = await this.db
      .selectFrom('template_builds')
      .innerJoin('templates', 'templates.id', 'template_builds.template_id')
      .select((e) => e.fn.sum<number>('template_builds.size_bytes').as('n'))
      .where('templates.owner', '=', owner)
      .where('templates.deleted_at', 'is', null)
      .where('template_builds.status', '=', 'ready')
      .where('template_builds.removed', '=', 0)
      .executeTakeFirst()
    return Number(r?.n ?? 0)
  }

  /** This replica still queues or runs builds `ids`: they stay its own until `until`. */
  async renewLeases(ids: string[], until: Date): Promise<void> {
    if (ids.length === 0) return
    await this.db
      .updateTable('template_builds')
      .set({ lease_until: until.toISOString() })
      .where('id', 'in', ids)
      .where('status', 'in', ['queued', 'building'])
      .execute()
  }

  /** Builds queued or running whose replica stopped renewing their lease before `now` (it went away). */
  async lapsed(now: Date): Promise<string[]> {
    const rows = await this.db
      .selectFrom('template_builds')
      .select('id')
      .where('status', 'in', ['queued', 'building'])
      .where('lease_until', '<', now.toISOString())
      .execute()
    return rows.map((r) => r.id)
  }

  /** Builds waiting for their context since before `before` (an ISO time). */
  async waitingSince(before: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('template_builds')
      .select('id')
      .where('status', '=', 'waiting')
      .where('created_at', '<', before)
      .execute()
    return rows.map((r) => r.id)
  }

  /** Builds that were not finished (the control plane stopped under them). */
  async unfinished(): Promise<string[]> {
    const rows = await this.db
      .selectFrom('template_builds')
      .select('id')
      .where('status', 'in', ['waiting', 'queued', 'building'])
      .execute()
    return rows.map((r) => r.id)
  }

  async appendLog(buildId: string, seq: number, line: BuildLogLine): Promise<BuildLogEntry> {
    const at = new Date().toISOString()
    await this.db
      .insertInto('build_logs')
      .values({ build_id: buildId, seq, at, step: line.step ?? null, stream: line.stream, message: line.message })
      .execute()
    return { seq, at, step: line.step ?? null, stream: line.stream, message: line.message }
  }

  async logs(buildId: string, from = 0, limit = 10_000): Promise<BuildLogEntry[]> {
    const rows = await this.db
      .selectFrom('build_logs')
      .select(['seq', 'at', 'step', 'stream', 'message'])
      .where('build_id', '=', buildId)
      .where('seq', '>=', from)
      .orderBy('seq')
      .limit(limit)
      .execute()
    return rows.map((r) => ({ ...r, seq: Number(r.seq), stream: r.stream as BuildLogEntry['stream'] }))
  }

  async logCount(buildId: string): Promise<number> {
    const r = await this.db
      .selectFrom('build_logs')
      .select((e) => e.fn.countAll<number>().as('n'))
      .where('build_id', '=', buildId)
      .executeTakeFirstOrThrow()
    return Number(r.n)
  }
}
