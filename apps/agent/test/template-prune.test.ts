// Pruning the template store on a real dir: what nothing uses goes, what something uses stays, and
// the layer cache is evicted least recently used first without ever breaking a chain.
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { LayerStore } from '../src/templates/layers.ts'
import { pruneTemplatesDir, rootfsInUse } from '../src/templates/prune.ts'

const root = mkdtempSync(join(tmpdir(), 'forkbox-prune-'))
after(() => rmSync(root, { recursive: true, force: true }))

const H = (c: string) => c.repeat(16)
const DIGEST = `sha256-${'a'.repeat(64)}`

/** A templates dir with a layer store; `layers` as [key, parent, bytes, last used (s ago)]. */
function store(layers: [string, string | null, number, number][] = []): { dir: string; layers: LayerStore } {
  const dir = mkdtempSync(join(root, 'templates-'))
  const layerStore = new LayerStore(dir)
  const now = Date.now() / 1000
  for (const [key, parent, bytes, ago] of layers) {
    const at = join(dir, '.layers', key)
    mkdirSync(join(at, 'diff'), { recursive: true })
    writeFileSync(join(at, 'diff', 'blob'), Buffer.alloc(bytes, 1))
    writeFileSync(join(at, 'layer.json'), JSON.stringify({ parent }))
    utimesSync(join(at, 'layer.json'), now - ago, now - ago)
  }
  return { dir, layers: layerStore }
}

function artifact(dir: string, name: string): void {
  mkdirSync(join(dir, name), { recursive: true })
  writeFileSync(join(dir, name, 'f'), 'x')
}

describe('pruning the template store', () => {
  it('removes rootfs dirs, snapshots, guests and images nothing uses; keeps the rest and everything else there', async () => {
    const { dir, layers } = store()
    const kept = [
      `base-${H('1')}`,
      `base-${H('1')}.snapshot-${H('2')}`,
      `guest-${H('3')}`,
      `runtime-${H('4')}`,
      `built-${H('5')}`,
      `img-${H('6')}`,
      `img-${H('6')}.snapshot-${H('7')}`,
      // a Dockerfile built-in not built by this process: kept by its prefix, with the rootfs it names
      `agent-built-${H('d')}.snapshot-${H('e')}`,
      `built-${H('d')}`,
    ]
    const stale = [
      `base-${H('1')}.snapshot-${H('8')}`,
      `guest-${H('9')}`,
      `built-${H('a')}`,
      `u-0123456789ab-1-built-${H('b')}.snapshot-${H('c')}`,
    ]
    for (const n of [...kept, ...stale]) artifact(dir, n)
    for (const n of ['.debs', 'notes', `.oci/${DIGEST}`, `.oci/sha256-${'b'.repeat(64)}`]) artifact(dir, n)
    const result = await pruneTemplatesDir(
      dir,
      {
        names: new Set(kept.slice(0, 5)),
        prefixes: ['img-', 'agent-'],
        images: new Set([DIGEST]),
      },
      { layers, buildsRunning: false },
    )
    assert.deepEqual(result.removed.sort(), [...stale, `.oci/sha256-${'b'.repeat(64)}`].sort())
    assert.ok(result.freedBytes > 0)
    const left = readdirSync(dir)
    for (const n of [...kept, '.debs', 'notes']) assert.ok(left.includes(n), n)
    assert.deepEqual(readdirSync(join(dir, '.oci')), [DIGEST])
    // nothing half-removed lies about
    assert.deepEqual(
      left.filter((n) => n.startsWith('.tmp-')),
      [],
    )
  })

  it('leaves pulled images and layers alone while a build runs', async () => {
    const { dir, layers } = store([['l1', null, 4096, 10]])
    artifact(dir, `.oci/${DIGEST}`)
    const result = await pruneTemplatesDir(
      dir,
      { names: new Set(), prefixes: [], images: new Set() },
      { layers, layerCacheBytes: 0, buildsRunning: true },
    )
    assert.deepEqual(result.removed, [])
    assert.ok(existsSync(join(dir, '.oci', DIGEST)))
    assert.ok(layers.has('l1'))
  })

  it('evicts layers least recently used first, leaves before their parents, down to the cap', async () => {
    // base ← a ← a2 (used 1 s ago);  base ← b (used 100 s ago);  c alone (used 50 s ago)
    const { layers } = store([
      ['base', null, 200_000, 300],
      ['a', 'base', 200_000, 200],
      ['a2', 'a', 200_000, 1],
      ['b', 'base', 200_000, 100],
      ['c', null, 200_000, 50],
    ])
    const one = await layers.evict(900_000)
    // b is the oldest leaf (base and a are parents, whatever their age)
    assert.deepEqual(one.removed, ['b'])
    assert.ok(one.freedBytes >= 200_000)
    const more = await layers.evict(300_000)
    // then c, then the chain from its leaf: a2 before a
    assert.deepEqual(more.removed, ['c', 'a2', 'a'])
    for (const k of ['base']) assert.ok(layers.has(k), k)
    for (const k of ['a', 'a2', 'b', 'c']) assert.ok(!layers.has(k), k)
    assert.deepEqual((await layers.evict(Number.MAX_SAFE_INTEGER)).removed, [])
  })

  it('a touch makes a layer the most recently used', async () => {
    const { layers } = store([
      ['x', null, 100_000, 100],
      ['y', null, 100_000, 10],
    ])
    layers.touch('x')
    assert.deepEqual((await layers.evict(150_000)).removed, ['y'])
  })

  it("finds the rootfs live sandboxes run on from their bundles' config.json", () => {
    const sandboxes = mkdtempSync(join(root, 'sandboxes-'))
    const templates = '/var/lib/forkbox/templates'
    const bundle = (name: string, config: unknown) => {
      mkdirSync(join(sandboxes, name))
      writeFileSync(join(sandboxes, name, 'config.json'), JSON.stringify(config))
    }
    bundle('s1', { root: { path: `${templates}/base-${H('1')}` } })
    bundle('s2', { root: { path: '/elsewhere/rootfs' } })
    bundle('s3', { root: {} })
    mkdirSync(join(sandboxes, 's4'))
    bundle('s5', 'not a config')
    assert.deepEqual([...rootfsInUse(sandboxes, templates)], [`base-${H('1')}`])
  })
})
