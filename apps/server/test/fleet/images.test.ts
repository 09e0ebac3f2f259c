// The control plane's side of images between hosts: the hash recorded when a holder made an image
// is what every receiver is asked to match (a direct pull, the shared store, a relay), a template
// image is pulled only from holders with a record of their copy, and the receiver's copy is
// recorded too. On SQLite and Postgres (the record is a migration on both).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { AppError, type HostCapacity, type ImageSource } from '@forkbox/protocol'
import pino from 'pino'
import { HostStore } from '../../src/fleet/hosts-store.ts'
import { Images } from '../../src/fleet/images.ts'
import type { Links } from '../../src/fleet/links.ts'
import type { RemoteAgent } from '../../src/fleet/remote-agent.ts'
import { openStore, type Store } from '../../src/store/db.ts'
import { startPostgres, type TestPostgres } from '../postgres.ts'

const RECORD = 'a'.repeat(64)
const SENDER = 'b'.repeat(64)

const capacity = (over: Partial<HostCapacity> = {}): HostCapacity => ({
  vcpus: 2,
  memoryBytes: 8 * 1024 ** 3,
  diskFreeBytes: 100 * 1024 ** 3,
  maxSandboxes: 10,
  sandboxes: 0,
  templates: [],
  pool: {},
  ...over,
})

/** What a host's agent was asked to do: only the image calls, the rest is never reached here. */
interface Calls {
  pullSnapshot: ImageSource[]
  pullRootfs: { url: string; sha256: string | null }[]
  importSnapshot: string[]
}

/** A fake agent at the edge: records the pulls it is asked for, fails them when told to. */
function fakeAgent(opts: { failPulls?: boolean } = {}): { agent: RemoteAgent; calls: Calls } {
  const calls: Calls = { pullSnapshot: [], pullRootfs: [], importSnapshot: [] }
  const agent = {
    async pullSnapshot(_id: string, from: ImageSource) {
      calls.pullSnapshot.push(from)
      if (opts.failPulls) throw new AppError('HOST_UNREACHABLE', 'no route to the holder')
    },
    async pullRootfs(_name: string, from: { url: string; sha256: string | null }) {
      calls.pullRootfs.push(from)
      if (opts.failPulls) throw new AppError('INTERNAL', 'transfer refused')
    },
    async exportSnapshot() {
      // the exporter says its own hash: a relay must not pass that on when there is a record
      return { sizeBytes: 3, stream: new Blob([new Uint8Array([1, 2, 3])]).stream(), sha256: Promise.resolve(SENDER) }
    },
    async deleteSnapshot() {},
    async importSnapshot(_id: string, body: AsyncIterable<Uint8Array>, sha256: Promise<string>) {
      for await (const _ of body) {
      }
      calls.importSnapshot.push(await sha256)
    },
  }
  return { agent: agent as unknown as RemoteAgent, calls }
}

function suite(name: string, open: () => Promise<Store>) {
  describe(`images between hosts, the control plane's record (${name})`, () => {
    let store: Store
    let hosts: HostStore
    const agents = new Map<string, ReturnType<typeof fakeAgent>>()
    const images = () => {
      const links: Links = {
        rows: () => hosts.list(),
        isFresh: () => true,
        reachable: () => hosts.list(),
        agentOf: async (id: string) => {
          const a = agents.get(id)
          if (!a) throw new Error(`no host ${id}`)
          return a.agent
        },
        remote: (row) => (agents.get(row.id) as ReturnType<typeof fakeAgent>).agent,
      }
      return new Images(links, hosts, Buffer.alloc(32, 7), pino({ level: 'silent' }))
    }
    const join = async (id: string, over: Partial<HostCapacity> = {}, failPulls = false) => {
      await hosts.join({ id, url: `http://127.0.0.1:1/${id}/`, version: 'test', capacity: capacity(over) }, `n-${id}`)
      agents.set(id, fakeAgent({ failPulls }))
    }
    const calls = (id: string) => (agents.get(id) as ReturnType<typeof fakeAgent>).calls

    before(async () => {
      store = await open()
      hosts = new HostStore(store.db)
      await join('h1', { templates: ['t'] })
      await join('h2')
      await join('h3', { templates: ['t'] })
      await join('h4', {}, true)
    })
    after(() => store.close())

    it("a direct pull is asked to match the hash recorded when the holder made the image, not the sender's", async () => {
      await hosts.place('snap-1', 'snapshot', 'h1', { vcpus: 0, memoryMB: 0 })
      await hosts.setDigest('snap-1', RECORD)
      assert.equal(await hosts.digestOf('snap-1'), RECORD)
      await images().copyImage('snap-1', 'h1', 'h2')
      const [from] = calls('h2').pullSnapshot
      assert.ok(from && 'url' in from, 'pulled from the holder')
      assert.equal(from.sha256, RECORD)
      assert.match(from.url, /\/v1\/agent\/images\/snap-1\?expires=\d+&sig=/)
    })

    it('a move keeps the record with the image on its new host', async () => {
      await images().moveImage('snap-1', 'h3')
      assert.equal(await hosts.hostOf('snap-1'), 'h3')
      assert.equal(await hosts.digestOf('snap-1'), RECORD)
    })

    it("a relay (the direct pull failed) hands the receiver the record, not the exporter's hash", async () => {
      await hosts.place('snap-2', 'snapshot', 'h1', { vcpus: 0, memoryMB: 0 })
      await hosts.setDigest('snap-2', RECORD)
      await images().copyImage('snap-2', 'h1', 'h4')
      assert.equal(calls('h4').pullSnapshot[0]?.sha256, RECORD)
      assert.deepEqual(calls('h4').importSnapshot, [RECORD])
    })

    it("an image made before records were kept: null, so the receiver falls back to the sender's hash", async () => {
      await hosts.place('snap-old', 'snapshot', 'h1', { vcpus: 0, memoryMB: 0 })
      assert.equal(await hosts.digestOf('snap-old'), null)
      await images().copyImage('snap-old', 'h1', 'h2')
      assert.equal(calls('h2').pullSnapshot.at(-1)?.sha256, null)
    })

    it("a template image is pulled only from holders with a record of their copy, each with its own; the receiver's copy is recorded", async () => {
      const rootfs = 'built-0123456789abcdef'
      // h3 lists the template but no build or pull of it was recorded there: not asked
      await hosts.placeRootfs(rootfs, 'h1', RECORD)
      await images().copyRootfs({ rootfs, template: 't' }, 'h2')
      assert.deepEqual(
        calls('h2').pullRootfs.map((f) => f.sha256),
        [RECORD],
      )
      assert.match(calls('h2').pullRootfs[0]?.url ?? '', /\/v1\/agent\/rootfs\/built-0123456789abcdef\?/)
      assert.deepEqual(calls('h3').pullRootfs, [])
      assert.deepEqual(Object.fromEntries(await hosts.rootfsCopies(rootfs)), { h1: RECORD, h2: RECORD })
    })

    it('a failed pull records nothing for the receiver, and no unrecorded holder is tried instead', async () => {
      const rootfs = 'built-fedcba9876543210'
      await hosts.placeRootfs(rootfs, 'h1', RECORD)
      await assert.rejects(images().copyRootfs({ rootfs, template: 't' }, 'h4'), { code: 'TEMPLATE_UNAVAILABLE' })
      assert.deepEqual(
        calls('h4').pullRootfs.map((f) => f.sha256),
        [RECORD],
      )
      assert.deepEqual([...(await hosts.rootfsCopies(rootfs)).keys()], ['h1'])
    })

    it('a template image with no record at all (built before records were kept) is asked of any holder, unchecked by a record', async () => {
      const before = calls('h2').pullRootfs.length
      await images().copyRootfs({ rootfs: 'built-00000000000000ff', template: 't' }, 'h2')
      assert.equal(calls('h2').pullRootfs.at(before)?.sha256, null)
    })
  })
}

const dir = mkdtempSync(join(tmpdir(), 'fbx-fleet-images-'))
let postgres: TestPostgres | undefined
after(async () => {
  await postgres?.stop()
  rmSync(dir, { recursive: true, force: true })
})

suite('sqlite', () => openStore({ path: join(dir, 'fleet.db') }))
suite('postgres', async () => {
  postgres ??= await startPostgres()
  return openStore({ path: join(dir, 'unused.db'), url: await postgres.database('fleet_images') })
})
