// Templates users build: who owns each name, its builds (one version each) and their logs. The
// agent holds the artifacts, under each build's agent name.
import type {
  BuildLogEntry,
  BuildLogLine,
  TemplateBuild,
  TemplateBuildSpec,
  TemplateBuildStatus,
} from '@forkbox/protocol'
import type { Db } from './db.ts'

interface TemplateRow {
  id: string
  owner: string
  name: string
  description: string
  public: number
  created_at: string
  deleted_at: string | null
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
    public: r.public === 1,
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
  byName(owner: string, name: string): TemplateRecord | null {
    const row = this.db
      .prepare('select * from templates where owner = ? and name = ? and deleted_at is null')
      .get(owner, name) as TemplateRow | undefined
    return row ? toTemplate(row) : null
  }

  /** A public live template named `name` (names of public templates are unique), or null. */
  publicByName(name: string): TemplateRecord | null {
    const row = this.db
      .prepare('select * from templates where name = ? and public = 1 and deleted_at is null')
      .get(name) as TemplateRow | undefined
    return row ? toTemplate(row) : null
  }

  get(id: string): TemplateRecord | null {
    const row = this.db.prepare('select * from templates where id = ? and deleted_at is null').get(id) as
      | TemplateRow
      | undefined
    return row ? toTemplate(row) : null
  }

  /** The owner's live templates and every public one. */
  visible(owner: string): TemplateRecord[] {
    return (
      this.db
        .prepare('select * from templates where deleted_at is null and (owner = ? or public = 1) order by name, id')
        .all(owner) as TemplateRow[]
    ).map(toTemplate)
  }

  insertTemplate(t: Omit<TemplateRecord, 'createdAt' | 'public'>): TemplateRecord {
    const createdAt = new Date().toISOString()
    this.db
      .prepare('insert into templates (id, owner, name, description, created_at) values (?, ?, ?, ?, ?)')
      .run(t.id, t.owner, t.name, t.description, createdAt)
    return { ...t, public: false, createdAt }
  }

  setPublic(id: string, value: boolean): void {
    this.db.prepare('update templates set public = ? where id = ?').run(value ? 1 : 0, id)
  }

  markDeleted(id: string): void {
    this.db.prepare('update templates set deleted_at = ? where id = ?').run(new Date().toISOString(), id)
  }

  /** A new build of template `t`, with the next version number. */
  insertBuild(
    t: TemplateRecord,
    id: string,
    status: TemplateBuildStatus,
    spec: (version: number) => TemplateBuildSpec,
  ): BuildRecord {
    return this.db.transaction(() => {
      const { v } = this.db
        .prepare('select coalesce(max(version), 0) + 1 as v from template_builds where template_id = ?')
        .get(t.id) as { v: number }
      this.db
        .prepare(
          'insert into template_builds (id, template_id, version, status, spec, created_at) values (?, ?, ?, ?, ?, ?)',
        )
        .run(id, t.id, v, status, JSON.stringify(spec(v)), new Date().toISOString())
      return this.getBuild(id) as BuildRecord
    })()
  }

  getBuild(id: string): BuildRecord | null {
    const row = this.db
      .prepare(
        'select b.*, t.name as template_name from template_builds b join templates t on t.id = b.template_id where b.id = ?',
      )
      .get(id) as (BuildRow & { template_name: string }) | undefined
    return row ? this.build(row, row.template_name) : null
  }

  builds(t: TemplateRecord): BuildRecord[] {
    return (
      this.db
        .prepare('select * from template_builds where template_id = ? order by version desc')
        .all(t.id) as BuildRow[]
    ).map((r) => this.build(r, t.name))
  }

  /** The ready build of `t` at `version`, or its newest ready one. */
  readyBuild(t: TemplateRecord, version?: number): BuildRecord | null {
    const row = (
      version === undefined
        ? this.db
            .prepare(
              "select * from template_builds where template_id = ? and status = 'ready' order by version desc limit 1",
            )
            .get(t.id)
        : this.db
            .prepare("select * from template_builds where template_id = ? and status = 'ready' and version = ?")
            .get(t.id, version)
    ) as BuildRow | undefined
    return row ? this.build(row, t.name) : null
  }

  /**
   * Ready builds whose artifacts the agent still has: those of live templates, and those of
   * deleted ones not removed yet (sandboxes or snapshots still started from them).
   */
  readySpecs(): { id: string; spec: TemplateBuildSpec; deleted: boolean }[] {
    return (
      this.db
        .prepare(
          `select b.id, b.spec, t.deleted_at is not null as deleted from template_builds b
           join templates t on t.id = b.template_id where b.status = 'ready' and b.removed = 0`,
        )
        .all() as { id: string; spec: string; deleted: number }[]
    ).map((r) => ({ id: r.id, spec: JSON.parse(r.spec) as TemplateBuildSpec, deleted: r.deleted === 1 }))
  }

  /** The build's artifacts are gone from the agent. */
  markRemoved(id: string): void {
    this.db.prepare('update template_builds set removed = 1 where id = ?').run(id)
  }

  /** How a user's build is shown to users (`name@version`); null for a name that is no build's. */
  labelOf(agentName: string): string | null {
    const m = /^u-([0-9a-f]+)-(\d+)$/.exec(agentName)
    if (!m) return null
    const row = this.db.prepare('select name from templates where id = ?').get(`tpl-${m[1]}`) as
      | { name: string }
      | undefined
    return row ? `${row.name}@${m[2]}` : null
  }

  /** Whether `name` is the agent name of some user's build (never creatable by its name alone). */
  isAgentName(name: string): boolean {
    const m = /^u-([0-9a-f]+)-(\d+)$/.exec(name)
    if (!m) return false
    return this.db.prepare('select 1 from templates where id = ?').get(`tpl-${m[1]}`) !== undefined
  }

  /** Moves a build on; `from` guards against a race (a build failed at restart is not then marked ready). */
  transition(
    id: string,
    from: TemplateBuildStatus[],
    to: TemplateBuildStatus,
    extra: { error?: { code: string; message: string }; spec?: TemplateBuildSpec } = {},
  ): boolean {
    const done = to === 'ready' || to === 'failed'
    const res = this.db
      .prepare(
        `update template_builds set status = ?, error_code = coalesce(?, error_code), error_message = coalesce(?, error_message),
           spec = coalesce(?, spec), finished_at = case when ? then ? else finished_at end
         where id = ? and status in (${from.map(() => '?').join(', ')})`,
      )
      .run(
        to,
        extra.error?.code ?? null,
        extra.error?.message ?? null,
        extra.spec ? JSON.stringify(extra.spec) : null,
        done ? 1 : 0,
        new Date().toISOString(),
        id,
        ...from,
      )
    return res.changes > 0
  }

  /** Builds waiting for their context since before `before` (an ISO time). */
  waitingSince(before: string): string[] {
    return (
      this.db.prepare("select id from template_builds where status = 'waiting' and created_at < ?").all(before) as {
        id: string
      }[]
    ).map((r) => r.id)
  }

  /** Builds that were not finished (the control plane stopped under them). */
  unfinished(): string[] {
    return (
      this.db.prepare("select id from template_builds where status in ('waiting', 'queued', 'building')").all() as {
        id: string
      }[]
    ).map((r) => r.id)
  }

  appendLog(buildId: string, seq: number, line: BuildLogLine): BuildLogEntry {
    const at = new Date().toISOString()
    this.db
      .prepare('insert into build_logs (build_id, seq, at, step, stream, message) values (?, ?, ?, ?, ?, ?)')
      .run(buildId, seq, at, line.step ?? null, line.stream, line.message)
    return { seq, at, step: line.step ?? null, stream: line.stream, message: line.message }
  }

  logs(buildId: string, from = 0, limit = 10_000): BuildLogEntry[] {
    return this.db
      .prepare(
        'select seq, at, step, stream, message from build_logs where build_id = ? and seq >= ? order by seq limit ?',
      )
      .all(buildId, from, limit) as BuildLogEntry[]
  }

  logCount(buildId: string): number {
    return (this.db.prepare('select count(*) as n from build_logs where build_id = ?').get(buildId) as { n: number }).n
  }
}
