// The control plane's tables, one schema for SQLite and Postgres (kysely), and the migrations that
// make them. Booleans are 0/1 integers and times ISO-8601 text on both, so rows read the same.
import { type Generated, type Kysely, type Migration, sql } from 'kysely'

export interface ApiKeysTable {
  id: string
  name: string
  prefix: string
  hash: string
  admin: number
  created_at: string
  revoked_at: string | null
  /** JSON `KeyLimits`: quotas and rate limits set by the admin (unset: the server's defaults). */
  limits: Generated<string>
  /** JSON `KeyScopes`: what the key may do (`{}`: everything a key may). */
  scopes: Generated<string>
  /** After this the key is refused (null: never). */
  expires_at: string | null
  /** A rotation's old secret, still accepted until `previous_expires_at`. */
  previous_hash: string | null
  previous_expires_at: string | null
}

export interface SandboxesTable {
  id: string
  owner: string
  template: string
  state: string
  metadata: string
  resources: string
  created_at: string
  expires_at: string
  ended_at: string | null
  error_reason: string | null
  error_message: string | null
  hibernate_snapshot: string | null
  persistent: Generated<number>
  network: string
  access_token: Generated<string>
  /** When a replica last saw a call of it (fleet: the idle reaper's replica reads what the others saw). */
  active_at: string | null
  /** `kill` or `hibernate`: what its TTL does. */
  on_timeout: Generated<string>
  /** Its TTL as last set (a wake after a timeout's hibernation starts it again). */
  ttl_seconds: number | null
  /** 1: frozen while idle (the default); 0: never (in-sandbox timers must keep time). */
  freeze: Generated<number>
}

export interface SandboxEventsTable {
  id: Generated<number>
  sandbox_id: string
  type: string
  at: string
  detail: string | null
}

export interface SnapshotsTable {
  id: string
  owner: string
  sandbox_id: string
  template: string
  resources: string
  size_bytes: number
  created_at: string
  name: string | null
}

export interface TemplatesTable {
  id: string
  owner: string
  name: string
  description: string
  public: Generated<number>
  created_at: string
  deleted_at: string | null
  /** The build the admin approved when publishing (other keys create from it alone); null: not public. */
  published_build: string | null
}

export interface TemplateBuildsTable {
  id: string
  template_id: string
  version: number
  status: string
  spec: string
  error_code: string | null
  error_message: string | null
  created_at: string
  finished_at: string | null
  removed: Generated<number>
  /** Until when the replica queueing or running it owns it (it renews this while it does). */
  lease_until: string | null
  /** What the ready build takes on its host's disk (null: built before this was kept). */
  size_bytes: number | null
}

export interface BuildLogsTable {
  build_id: string
  seq: number
  at: string
  step: number | null
  stream: string
  message: string
}

export interface RegistryCredentialsTable {
  owner: string
  registry: string
  username: string
  sealed: string
  created_at: string
}

/** A host agent that joined the control plane (fleet mode). */
export interface HostsTable {
  id: string
  /** Where the control plane reaches its agent (`http://addr:port`). */
  url: string
  /** Changes at each join: the host's credential is derived from it, so an old one stops working. */
  nonce: string
  /** `ready`, or `cordoned` (takes no new sandboxes). */
  state: string
  joined_at: string
  heartbeat_at: string
  /** The last heartbeat's `HostCapacity`, as JSON. */
  capacity: string
  version: string
}

/** Which host holds a sandbox or snapshot (fleet mode), and what it reserves there. */
export interface PlacementsTable {
  id: string
  kind: string
  host: string
  vcpus: number
  memory_mb: number
  created_at: string
  /**
   * A snapshot's image: the SHA-256 of its export stream, as its holder reported when it made it
   * (the record every copy to another host is checked against); null before such records were kept.
   */
  sha256: Generated<string | null>
}

/** A built template's rootfs on a host, and the SHA-256 of its export stream as recorded when it got there. */
export interface RootfsCopiesTable {
  rootfs: string
  host: string
  sha256: string
  created_at: string
}

/** One token bucket (GCRA: its theoretical arrival time, epoch ms) per key and route class. */
export interface RateLimitsTable {
  bucket: string
  tat: number
}

/** Who did what: append-only. */
export interface AuditLogTable {
  id: Generated<number>
  at: string
  /** The acting key (null: a request no key proved, e.g. a refused one). */
  key_id: string | null
  action: string
  /** What it acted on (a sandbox, key, template, snapshot id). */
  target: string | null
  /** HTTP status it ended with. */
  status: number
  ip: string | null
  user_agent: string | null
  request_id: string | null
  detail: string | null
}

/**
 * What a key used, one row per stretch of a sandbox's life (from its record or wake until it
 * stops, hibernates or is lost) or a snapshot's storage (until it is deleted). Opened and closed in
 * the same transaction as the state change that causes it: counted once, whichever replica did it.
 */
export interface UsagePeriodsTable {
  id: Generated<number>
  owner: string
  /** `sandbox` or `snapshot`. */
  kind: string
  subject_id: string
  started_at: string
  ended_at: string | null
  vcpus: number
  memory_mb: number
  /** A snapshot's size. */
  bytes: number
  /** Bytes the sandbox sent out during this period (the agent's counter, read while it ran). */
  egress_bytes: number
}

export interface Schema {
  api_keys: ApiKeysTable
  sandboxes: SandboxesTable
  sandbox_events: SandboxEventsTable
  snapshots: SnapshotsTable
  templates: TemplatesTable
  template_builds: TemplateBuildsTable
  build_logs: BuildLogsTable
  registry_credentials: RegistryCredentialsTable
  hosts: HostsTable
  placements: PlacementsTable
  rootfs_copies: RootfsCopiesTable
  rate_limits: RateLimitsTable
  audit_log: AuditLogTable
  usage_periods: UsagePeriodsTable
}

export type Dialect = 'sqlite' | 'postgres'

const NO_NETWORK = '{"internet":false,"allowOut":[],"denyOut":[],"ports":[]}'

/**
 * Every migration, in order, for both dialects. The first is the schema as SQLite databases made
 * by the releases before kysely left it (they are adopted, see db.ts); add new ones after it.
 */
export function migrations(dialect: Dialect): Record<string, Migration> {
  // the one type the two spell differently: an auto-numbered key
  const serial = dialect === 'postgres' ? sql`bigserial` : sql`integer`
  return {
    '0001-initial': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('hash', 'text', (c) => c.notNull().unique())
          .addColumn('admin', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('revoked_at', 'text')
          .execute()
        await db.schema
          .createTable('sandboxes')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('owner', 'text', (c) => c.notNull().references('api_keys.id'))
          .addColumn('template', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('metadata', 'text', (c) => c.notNull())
          .addColumn('resources', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text', (c) => c.notNull())
          .addColumn('ended_at', 'text')
          .addColumn('error_reason', 'text')
          .addColumn('error_message', 'text')
          .addColumn('hibernate_snapshot', 'text')
          .addColumn('persistent', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('network', 'text', (c) => c.notNull().defaultTo(NO_NETWORK))
          .addColumn('access_token', 'text', (c) => c.notNull().defaultTo(''))
          .execute()
        await db.schema.createIndex('sandboxes_owner_state').on('sandboxes').columns(['owner', 'state']).execute()
        await db.schema.createIndex('sandboxes_state_expiry').on('sandboxes').columns(['state', 'expires_at']).execute()
        await db.schema
          .createTable('sandbox_events')
          .addColumn('id', serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
          .addColumn('sandbox_id', 'text', (c) => c.notNull())
          .addColumn('type', 'text', (c) => c.notNull())
          .addColumn('at', 'text', (c) => c.notNull())
          .addColumn('detail', 'text')
          .execute()
        await db.schema
          .createIndex('sandbox_events_sandbox')
          .on('sandbox_events')
          .columns(['sandbox_id', 'id'])
          .execute()
        await db.schema.createIndex('sandbox_events_at').on('sandbox_events').column('at').execute()
        await db.schema
          .createTable('snapshots')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('owner', 'text', (c) => c.notNull().references('api_keys.id'))
          .addColumn('sandbox_id', 'text', (c) => c.notNull())
          .addColumn('template', 'text', (c) => c.notNull())
          .addColumn('resources', 'text', (c) => c.notNull())
          .addColumn('size_bytes', 'bigint', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute()
        await db.schema.createIndex('snapshots_owner').on('snapshots').columns(['owner', 'created_at']).execute()
        await db.schema
          .createTable('templates')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('owner', 'text', (c) => c.notNull().references('api_keys.id'))
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('description', 'text', (c) => c.notNull())
          .addColumn('public', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('deleted_at', 'text')
          .execute()
        await db.schema
          .createIndex('templates_owner_name')
          .on('templates')
          .columns(['owner', 'name'])
          .unique()
          .where(sql.ref('deleted_at'), 'is', null)
          .execute()
        await db.schema
          .createTable('template_builds')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('template_id', 'text', (c) => c.notNull().references('templates.id'))
          .addColumn('version', 'integer', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('spec', 'text', (c) => c.notNull())
          .addColumn('error_code', 'text')
          .addColumn('error_message', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('finished_at', 'text')
          .addColumn('removed', 'integer', (c) => c.notNull().defaultTo(0))
          .execute()
        await db.schema
          .createIndex('template_builds_version')
          .on('template_builds')
          .columns(['template_id', 'version'])
          .unique()
          .execute()
        await db.schema.createIndex('template_builds_status').on('template_builds').column('status').execute()
        await db.schema
          .createTable('build_logs')
          .addColumn('build_id', 'text', (c) => c.notNull().references('template_builds.id'))
          .addColumn('seq', 'integer', (c) => c.notNull())
          .addColumn('at', 'text', (c) => c.notNull())
          .addColumn('step', 'integer')
          .addColumn('stream', 'text', (c) => c.notNull())
          .addColumn('message', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('build_logs_pk', ['build_id', 'seq'])
          .execute()
        await db.schema
          .createTable('registry_credentials')
          .addColumn('owner', 'text', (c) => c.notNull().references('api_keys.id'))
          .addColumn('registry', 'text', (c) => c.notNull())
          .addColumn('username', 'text', (c) => c.notNull())
          .addColumn('sealed', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('registry_credentials_pk', ['owner', 'registry'])
          .execute()
      },
    },
    '0002-hosts': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('hosts')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('nonce', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('joined_at', 'text', (c) => c.notNull())
          .addColumn('heartbeat_at', 'text', (c) => c.notNull())
          .addColumn('capacity', 'text', (c) => c.notNull())
          .addColumn('version', 'text', (c) => c.notNull())
          .execute()
        await db.schema
          .createTable('placements')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('host', 'text', (c) => c.notNull())
          .addColumn('vcpus', 'real', (c) => c.notNull())
          .addColumn('memory_mb', 'integer', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute()
        await db.schema.createIndex('placements_host').on('placements').columns(['host', 'kind']).execute()
      },
    },
    '0003-activity': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('sandboxes').addColumn('active_at', 'text').execute()
      },
    },
    '0004-build-leases': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('template_builds').addColumn('lease_until', 'text').execute()
      },
    },
    '0005-on-timeout': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('sandboxes')
          .addColumn('on_timeout', 'text', (c) => c.notNull().defaultTo('kill'))
          .execute()
        await db.schema.alterTable('sandboxes').addColumn('ttl_seconds', 'integer').execute()
      },
    },
    '0006-snapshot-names': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('snapshots').addColumn('name', 'text').execute()
        await db.schema.createIndex('snapshots_owner_name').on('snapshots').columns(['owner', 'name']).execute()
      },
    },
    '0007-freeze': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('sandboxes')
          .addColumn('freeze', 'integer', (c) => c.notNull().defaultTo(1))
          .execute()
      },
    },
    '0008-tenancy': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('api_keys')
          .addColumn('limits', 'text', (c) => c.notNull().defaultTo('{}'))
          .execute()
        await db.schema
          .alterTable('api_keys')
          .addColumn('scopes', 'text', (c) => c.notNull().defaultTo('{}'))
          .execute()
        await db.schema.alterTable('api_keys').addColumn('expires_at', 'text').execute()
        await db.schema.alterTable('api_keys').addColumn('previous_hash', 'text').execute()
        await db.schema.alterTable('api_keys').addColumn('previous_expires_at', 'text').execute()
        await db.schema.createIndex('api_keys_previous_hash').on('api_keys').column('previous_hash').execute()
        await db.schema
          .createTable('rate_limits')
          .addColumn('bucket', 'text', (c) => c.primaryKey())
          .addColumn('tat', 'double precision', (c) => c.notNull())
          .execute()
        await db.schema
          .createTable('audit_log')
          .addColumn('id', serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
          .addColumn('at', 'text', (c) => c.notNull())
          .addColumn('key_id', 'text')
          .addColumn('action', 'text', (c) => c.notNull())
          .addColumn('target', 'text')
          .addColumn('status', 'integer', (c) => c.notNull())
          .addColumn('ip', 'text')
          .addColumn('user_agent', 'text')
          .addColumn('request_id', 'text')
          .addColumn('detail', 'text')
          .execute()
        await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute()
        await db.schema.createIndex('audit_log_key').on('audit_log').columns(['key_id', 'id']).execute()
        await db.schema
          .createTable('usage_periods')
          .addColumn('id', serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('subject_id', 'text', (c) => c.notNull())
          .addColumn('started_at', 'text', (c) => c.notNull())
          .addColumn('ended_at', 'text')
          .addColumn('vcpus', 'real', (c) => c.notNull().defaultTo(0))
          .addColumn('memory_mb', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
          .addColumn('egress_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute()
        await db.schema
          .createIndex('usage_periods_owner')
          .on('usage_periods')
          .columns(['owner', 'started_at'])
          .execute()
        // at most one open period per subject
        await db.schema
          .createIndex('usage_periods_open')
          .on('usage_periods')
          .column('subject_id')
          .unique()
          .where(sql.ref('ended_at'), 'is', null)
          .execute()
      },
    },
    '0009-template-sizes': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('template_builds').addColumn('size_bytes', 'bigint').execute()
      },
    },
    '0010-published-builds': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('templates').addColumn('published_build', 'text').execute()
        // a template public before this approved, in effect, its newest ready build: that one stays
        // what other keys get, so an upgrade changes nothing for them
        await sql`
          update templates set published_build = (
            select b.id from template_builds b
            where b.template_id = templates.id and b.status = 'ready' and b.removed = 0
            order by b.version desc limit 1)
          where public = 1`.execute(db)
        // public with nothing ready to approve: others could create nothing from it anyway
        await sql`update templates set public = 0 where public = 1 and published_build is null`.execute(db)
      },
    },
    '0011-image-digests': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('placements').addColumn('sha256', 'text').execute()
        await db.schema
          .createTable('rootfs_copies')
          .addColumn('rootfs', 'text', (c) => c.notNull())
          .addColumn('host', 'text', (c) => c.notNull())
          .addColumn('sha256', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('rootfs_copies_pk', ['rootfs', 'host'])
          .execute()
      },
    },
  }
}
