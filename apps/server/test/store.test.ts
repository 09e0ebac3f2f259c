// The store on real Postgres (a cluster the test starts) and on SQLite files older releases made:
// one schema, migrated once however many replicas start together, shared by replicas.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { Kysely, type Migration, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely'
import pg from 'pg'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { LEGACY_SQLITE_MIGRATIONS, openStore } from '../src/store/db.ts'
import { hashKey, KeyStore } from '../src/store/keys.ts'
import { type Dialect, migrations } from '../src/store/schema.ts'
import { TemplateStore } from '../src/store/templates.ts'
import { FakeAgent } from './fake-agent.ts'
import { startPostgres, type TestPostgres } from './postgres.ts'

const dir = mkdtempSync(join(tmpdir(), 'fbx-store-'))
let postgres: TestPostgres | undefined
const pgsrv = (): TestPostgres => {
  if (!postgres) throw new Error('postgres is not started')
  return postgres
}

before(async () => {
  postgres = await startPostgres()
})
after(async () => {
  await postgres?.stop()
  rmSync(dir, { recursive: true, force: true })
})

async function call(cp: ControlPlane, key: string, method: string, path: string, body?: unknown) {
  const res = await cp.app.request(path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

async function settled(cp: ControlPlane, key: string, buildId: string) {
  for (let i = 0; i < 200; i++) {
    const b = await call(cp, key, 'GET', `/v1/builds/${buildId}`)
    if (b.body.status === 'ready' || b.body.status === 'failed') return b.body
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`build ${buildId} did not finish`)
}

describe('the store', () => {
  it('on an empty Postgres database, stores opening at once migrate it exactly once', async () => {
    const url = await pgsrv().database('race')
    const path = join(dir, 'unused.sqlite')
    const stores = await Promise.all([1, 2, 3].map(() => openStore({ path, url })))
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(stores[0]?.db as never)
    assert.deepEqual(
      rows.map((r) => r.name),
      Object.keys(migrations('postgres')),
    )
    for (const s of stores) assert.equal(s.dialect, 'postgres')
    await Promise.all(stores.map((s) => s.close()))
  })

  it('a control plane on Postgres: keys, sandboxes and their metadata filter, events, versioned builds, sealed logins; a second replica sees it all', async () => {
    const url = await pgsrv().database('plane')
    const config = (n: number) => ({
      dbPath: join(dir, `replica-${n}.sqlite`),
      secretPath: join(dir, 'shared.secret'),
      databaseUrl: url,
      logLevel: 'silent' as const,
      reaperIntervalMs: 60_000,
    })
    const a = await createControlPlane({ agent: new FakeAgent(), config: config(1) })
    const b = await createControlPlane({ agent: new FakeAgent(), config: config(2) })
    try {
      const key = a.bootstrapKey as string
      assert.ok(key, 'the first replica made the bootstrap key')
      assert.equal(b.bootstrapKey, null, 'the second found it there')
      for (const team of ['red', 'blue', 'red']) {
        const r = await call(a, key, 'POST', '/v1/sandboxes', { metadata: { team, 'odd"key': 'x' } })
        assert.equal(r.status, 201, JSON.stringify(r.body))
      }
      const red = await call(b, key, 'GET', '/v1/sandboxes?metadata.team=red')
      assert.equal(red.body.sandboxes.length, 2)
      const odd = await call(b, key, 'GET', `/v1/sandboxes?${encodeURIComponent('metadata.odd"key')}=x`)
      assert.equal(odd.body.sandboxes.length, 3)
      const events = await call(b, key, 'GET', '/v1/events')
      const ids = events.body.events.map((e: { id: number }) => e.id)
      assert.deepEqual(
        ids,
        [...ids].sort((x: number, y: number) => x - y),
      )
      assert.equal(events.body.events.filter((e: { type: string }) => e.type === 'created').length, 3)
      // builds of one name get the next version, whichever replica starts them
      const v1 = await call(a, key, 'POST', '/v1/templates', { name: 'img', image: 'registry.example/img:1' })
      const v2 = await call(b, key, 'POST', '/v1/templates', { name: 'img', image: 'registry.example/img:2' })
      assert.deepEqual([v1.body.build.version, v2.body.build.version], [1, 2])
      assert.equal((await settled(a, key, v1.body.build.id)).status, 'ready')
      assert.equal((await settled(b, key, v2.body.build.id)).status, 'ready')
      const logs = (await call(b, key, 'GET', `/v1/builds/${v1.body.build.id}`)).body.logs
      assert.deepEqual(
        logs.map((l: { seq: number }) => l.seq),
        logs.map((_: unknown, i: number) => i),
      )
      const login = await call(a, key, 'PUT', '/v1/registries/registry.example', { username: 'u', password: 'pw-1' })
      assert.equal(login.status, 200, JSON.stringify(login.body))
      const listed = await call(b, key, 'GET', '/v1/registries')
      assert.deepEqual(
        listed.body.registries.map((r: { registry: string }) => r.registry),
        ['registry.example'],
      )
      assert.ok(!JSON.stringify(listed.body).includes('pw-1'))
      // a kill through one replica is what the other reads
      const first = red.body.sandboxes[0].id
      assert.equal((await call(b, key, 'DELETE', `/v1/sandboxes/${first}`)).status, 204)
      assert.equal((await call(a, key, 'GET', `/v1/sandboxes/${first}`)).body.state, 'killed')
    } finally {
      await b.close()
      await a.close()
    }
  })

  it('adopts a SQLite database an older release made (its own migrations finished first)', async () => {
    const path = join(dir, 'old.sqlite')
    const old = new Database(path)
    // as the release before the last migration left it
    for (const [i, m] of LEGACY_SQLITE_MIGRATIONS.slice(0, -1).entries()) {
      old.exec(m)
      old.pragma(`user_version = ${i + 1}`)
    }
    old
      .prepare('insert into api_keys (id, name, prefix, hash, admin, created_at) values (?, ?, ?, ?, 1, ?)')
      .run('key_old', 'admin', 'fbx_0123456', hashKey('fbx_old-secret'), new Date().toISOString())
    old.close()
    const store = await openStore({ path })
    try {
      assert.deepEqual(await new KeyStore(store.db).authenticate('fbx_old-secret'), {
        keyId: 'key_old',
        admin: true,
        scopes: {},
        quotas: {},
        rateLimits: {},
      })
      const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(store.db)
      assert.deepEqual(
        rows.map((r) => r.name),
        Object.keys(migrations('sqlite')),
      )
      // the last legacy migration ran: its table is there
      await sql`select owner from registry_credentials`.execute(store.db)
    } finally {
      await store.close()
    }
    // opening it again changes nothing
    const again = await openStore({ path })
    await again.close()
  })

  for (const dialect of ['sqlite', 'postgres'] as const)
    it(`on ${dialect}, a template public before publishing approved builds is published at its newest ready build`, async () => {
      const path = join(dir, `publish-${dialect}.sqlite`)
      const url = dialect === 'postgres' ? await pgsrv().database('publishing') : undefined
      await migrateBefore(dialect, '0010-published-builds', path, url)
      const store = await openStore({ path, ...(url ? { url } : {}) })
      try {
        const templates = new TemplateStore(store.db)
        const shared = await templates.publicByName('shared')
        assert.deepEqual([shared?.public, shared?.publishedBuild], [true, 'bld-shared-2'])
        // public with nothing ready: private now (nothing to approve)
        assert.equal(await templates.publicByName('unbuilt'), null)
        assert.deepEqual(
          [(await templates.get('tpl-unbuilt'))?.public, (await templates.get('tpl-unbuilt'))?.publishedBuild],
          [false, null],
        )
        const own = await templates.get('tpl-own')
        assert.deepEqual([own?.public, own?.publishedBuild], [false, null])
      } finally {
        await store.close()
      }
    })
})

/**
 * A database migrated up to (not including) `name`, holding templates as releases before it left
 * them: a public one with two ready builds and a newer failed one, a public one with no ready
 * build, a private one.
 */
async function migrateBefore(dialect: Dialect, name: string, path: string, url?: string): Promise<void> {
  const db = new Kysely<unknown>({
    dialect:
      dialect === 'postgres'
        ? new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) })
        : new SqliteDialect({ database: new Database(path) }),
  })
  try {
    const earlier = Object.entries(migrations(dialect)).filter(([n]) => n < name)
    const all: Record<string, Migration> = Object.fromEntries(earlier)
    const { error } = await new Migrator({ db, provider: { getMigrations: async () => all } }).migrateToLatest()
    if (error) throw error
    const at = new Date().toISOString()
    await sql`insert into api_keys (id, name, prefix, hash, admin, created_at) values ('key_a', 'a', 'fbx_a', 'h', 0, ${at})`.execute(
      db,
    )
    for (const [id, tpl, pub] of [
      ['tpl-shared', 'shared', 1],
      ['tpl-unbuilt', 'unbuilt', 1],
      ['tpl-own', 'own', 0],
    ] as const)
      await sql`insert into templates (id, owner, name, description, public, created_at) values (${id}, 'key_a', ${tpl}, '', ${pub}, ${at})`.execute(
        db,
      )
    for (const [id, tpl, version, status] of [
      ['bld-shared-1', 'tpl-shared', 1, 'ready'],
      ['bld-shared-2', 'tpl-shared', 2, 'ready'],
      ['bld-shared-3', 'tpl-shared', 3, 'failed'],
      ['bld-unbuilt-1', 'tpl-unbuilt', 1, 'failed'],
      ['bld-own-1', 'tpl-own', 1, 'ready'],
    ] as const)
      await sql`insert into template_builds (id, template_id, version, status, spec, created_at) values (${id}, ${tpl}, ${version}, ${status}, '{}', ${at})`.execute(
        db,
      )
  } finally {
    await db.destroy()
  }
}
