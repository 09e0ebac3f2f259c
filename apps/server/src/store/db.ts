// The store: SQLite (a file, `forkbox up`'s default) or Postgres (`FORKBOX_DATABASE_URL`), one
// schema and one set of migrations through kysely (schema.ts), run at open under the migrator's
// lock (an advisory lock on Postgres), so replicas starting together do not race.
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs'
import Database from 'better-sqlite3'
import { Kysely, type Migration, type MigrationProvider, Migrator, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import pino, { type Logger } from 'pino'
import { PgSession } from './pg-session.ts'
import { type Dialect, migrations, type Schema } from './schema.ts'

export type Db = Kysely<Schema>

export interface Store {
  db: Db
  dialect: Dialect
  /** Postgres only: the replica's own session (cross-replica events, the reapers' leader lock). */
  session: PgSession | null
  close(): Promise<void>
}

/**
 * The SQLite migrations of the releases before kysely, frozen: they only bring a database those
 * releases made up to the schema `0001-initial` describes, which is then recorded as applied.
 */
export const LEGACY_SQLITE_MIGRATIONS = [
  `create table api_keys (
     id text primary key, name text not null, prefix text not null, hash text not null unique,
     admin integer not null default 0, created_at text not null, revoked_at text);
   create table sandboxes (
     id text primary key, owner text not null references api_keys(id), template text not null,
     state text not null, metadata text not null, resources text not null, created_at text not null,
     expires_at text not null, ended_at text, error_reason text, error_message text);
   create index sandboxes_owner_state on sandboxes(owner, state);
   create index sandboxes_state_expiry on sandboxes(state, expires_at);
   create table sandbox_events (
     id integer primary key autoincrement, sandbox_id text not null, type text not null,
     at text not null, detail text);
   create index sandbox_events_sandbox on sandbox_events(sandbox_id, id);`,
  `create table snapshots (
     id text primary key, owner text not null references api_keys(id), sandbox_id text not null,
     template text not null, resources text not null, size_bytes integer not null, created_at text not null);
   create index snapshots_owner on snapshots(owner, created_at);`,
  `alter table sandboxes add column hibernate_snapshot text;`,
  `alter table sandboxes add column persistent integer not null default 0;`,
  `create index sandbox_events_at on sandbox_events(at);`,
  `alter table sandboxes add column network text not null default '{"internet":false,"allowOut":[],"denyOut":[],"ports":[]}';
   alter table sandboxes add column access_token text not null default '';`,
  // tokens are derived from the server secret now: the plain ones stored before go
  `update sandboxes set access_token = '';`,
  // templates users build: a name per key (or public), a build per version, each build's log
  `create table templates (
     id text primary key, owner text not null references api_keys(id), name text not null,
     description text not null, public integer not null default 0, created_at text not null,
     deleted_at text);
   create unique index templates_owner_name on templates(owner, name) where deleted_at is null;
   create table template_builds (
     id text primary key, template_id text not null references templates(id), version integer not null,
     status text not null, spec text not null, error_code text, error_message text,
     created_at text not null, finished_at text, removed integer not null default 0);
   create unique index template_builds_version on template_builds(template_id, version);
   create index template_builds_status on template_builds(status);
   create table build_logs (
     build_id text not null references template_builds(id), seq integer not null, at text not null,
     step integer, stream text not null, message text not null, primary key (build_id, seq));`,
  // a key's registry logins: the password sealed with a key derived from the server secret
  `create table registry_credentials (
     owner text not null references api_keys(id), registry text not null, username text not null,
     sealed text not null, created_at text not null, primary key (owner, registry));`,
]

/** The database and its WAL files are the owner's only (keys' hashes, tenants' metadata). */
function restrict(path: string): void {
  if (path === ':memory:') return
  closeSync(openSync(path, 'a', 0o600))
  for (const f of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(f)) chmodSync(f, 0o600)
}

class InCode implements MigrationProvider {
  constructor(private readonly all: Record<string, Migration>) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return this.all
  }
}

/**
 * A SQLite database an older release made: its own migrations finished. Its schema is then what
 * `0001-initial` makes, so that migration is recorded as run without running it.
 */
function adoptLegacy(sqlite: Database.Database, all: Record<string, Migration>): Record<string, Migration> {
  const version = sqlite.pragma('user_version', { simple: true }) as number
  if (version === 0) return all
  for (let v = version; v < LEGACY_SQLITE_MIGRATIONS.length; v++) {
    sqlite.transaction(() => {
      sqlite.exec(LEGACY_SQLITE_MIGRATIONS[v] as string)
      sqlite.pragma(`user_version = ${v + 1}`)
    })()
  }
  return { ...all, '0001-initial': { up: async () => {} } }
}

/** Opens the store: Postgres when `url` is given, else the SQLite file at `path`; migrated to the latest schema. */
export async function openStore(opts: { path: string; url?: string; log?: Logger }): Promise<Store> {
  let db: Db
  let dialect: Dialect
  let sqlite: Database.Database | null = null
  if (opts.url) {
    dialect = 'postgres'
    const pool = new pg.Pool({ connectionString: opts.url, max: 10, connectionTimeoutMillis: 5_000 })
    // an idle connection that Postgres drops (a restart, a failover) is an 'error' event: without a
    // listener it would end the process; the next query opens a new connection instead
    pool.on('error', () => {})
    // the same for a connection checked out between two queries (a transaction, a replica
    // closing): its query fails, and the process lives on
    pool.on('connect', (client) => client.on('error', () => {}))
    db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) })
  } else {
    dialect = 'sqlite'
    restrict(opts.path)
    sqlite = new Database(opts.path)
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('synchronous = NORMAL')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('busy_timeout = 5000')
    db = new Kysely<Schema>({ dialect: new SqliteDialect({ database: sqlite }) })
  }
  try {
    const all = sqlite ? adoptLegacy(sqlite, migrations(dialect)) : migrations(dialect)
    const { error } = await new Migrator({ db, provider: new InCode(all) }).migrateToLatest()
    if (error) throw error
  } catch (err) {
    await db.destroy()
    throw err
  }
  const session = opts.url ? new PgSession(opts.url, opts.log ?? pino({ level: 'silent' })) : null
  return {
    db,
    dialect,
    session,
    async close() {
      await session?.close()
      await db.destroy()
    },
  }
}
