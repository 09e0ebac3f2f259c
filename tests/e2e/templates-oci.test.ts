// Templates from OCI images: a local registry (Debian's docker-registry) holds an image made from the
// baked `base` rootfs; templates naming it are pulled without a Docker engine, baked, and created from.
import assert from 'node:assert/strict'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ForkboxError, Sandbox } from '@forkbox/sdk'
import { cleanupDataDir, leftovers, NOTHING_LEFT, sharedTemplatesDir, startTestHost, type TestHost } from './harness.ts'
import { baseRootfs, pulledLayout, startRegistry, type TestRegistry } from './registry.ts'

const repoRoot = new URL('../../', import.meta.url).pathname
const work = mkdtempSync(join(tmpdir(), 'forkbox-e2e-oci-'))
const definitionsDir = join(work, 'definitions')
const PREFIX = `fbx-oci-${process.pid}`
let registry: TestRegistry | undefined
let port = 0
let digest = ''
let bareDigest = ''

function stopRegistry(): void {
  registry?.stop()
  registry = undefined
}

function define(name: string, image: string): void {
  const base = JSON.parse(readFileSync(join(repoRoot, 'templates/base/template.json'), 'utf8'))
  mkdirSync(join(definitionsDir, name))
  const { packages: _, ...rest } = base
  writeFileSync(join(definitionsDir, name, 'template.json'), JSON.stringify({ ...rest, name, image }))
}

let t: TestHost | undefined
const host = (): TestHost => {
  if (!t) throw new Error('the test host is not started')
  return t
}

// not useTestHost: the registry, the image and the definitions must exist before the host starts
before(async () => {
  registry = await startRegistry(work)
  port = registry.port
  digest = registry.push(baseRootfs(), 'fbx-test:1')
  // an image with no Python: the guest cannot run in it (yet), and the build says so
  const bare = join(work, 'bare')
  mkdirSync(join(bare, 'etc'), { recursive: true })
  writeFileSync(join(bare, 'etc/os-release'), 'ID=bare\n')
  bareDigest = registry.push(bare, 'fbx-bare:1')
  // the host still prebuilds `base`: its definition comes along
  mkdirSync(definitionsDir)
  cpSync(join(repoRoot, 'templates/base'), join(definitionsDir, 'base'), { recursive: true })
  define(`${PREFIX}-tag`, `127.0.0.1:${port}/fbx-test:1`)
  define(`${PREFIX}-pinned`, `127.0.0.1:${port}/fbx-test@${digest}`)
  define(`${PREFIX}-missing`, `127.0.0.1:${port}/fbx-test:nope`)
  define(`${PREFIX}-bad`, `-127.0.0.1:${port}/fbx-test:1`)
  define(`${PREFIX}-nopython`, `127.0.0.1:${port}/fbx-bare:1`)
  t = await startTestHost({ definitionsDir, poolSize: 0 })
})

after(async () => {
  stopRegistry()
  try {
    if (t) {
      await t.stop()
      assert.deepEqual(leftovers(t), NOTHING_LEFT)
      cleanupDataDir(t)
    }
  } finally {
    // the image templates' rootfs, snapshots and pulled layout live in the shared templates dir
    for (const name of readdirSync(sharedTemplatesDir))
      if (name.startsWith(PREFIX)) rmSync(join(sharedTemplatesDir, name), { recursive: true, force: true })
    for (const d of [digest, bareDigest]) if (d) rmSync(pulledLayout(d), { recursive: true, force: true })
    rmSync(work, { recursive: true, force: true })
  }
})

describe('templates from OCI images', () => {
  it('pulls the image by tag, bakes it, and a sandbox from it runs commands and round-trips files', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-tag`, ttlSeconds: 120 })
    assert.ok(existsSync(pulledLayout(digest)), 'the image is in the pull cache under its digest')
    const baked = readdirSync(sharedTemplatesDir).filter((n) => n.startsWith(`${PREFIX}-tag-`))
    assert.ok(
      baked.some((n) => n.includes('.snapshot-')),
      `baked into a snapshot as the built-in templates are: ${baked}`,
    )
    const os = await sbx.exec(['cat', '/etc/os-release'])
    assert.equal(os.exitCode, 0, os.stderr)
    assert.match(os.stdout, /Debian GNU\/Linux 12/)
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
    await sbx.files.write('/work/round.bin', bytes)
    assert.deepEqual(Buffer.from(await sbx.files.read('/work/round.bin', { format: 'bytes' })), bytes)
    assert.equal((await sbx.exec(['id', '-un'])).stdout, 'user\n')
  })

  it('a bad reference, a missing tag and an image without Python are clear errors, and the host carries on', async () => {
    await assert.rejects(Sandbox.create({ ...host().conn, template: `${PREFIX}-bad` }), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'VALIDATION_FAILED')
      assert.match(e.message, /invalid image reference/)
      return true
    })
    await assert.rejects(Sandbox.create({ ...host().conn, template: `${PREFIX}-missing` }), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'IMAGE_NOT_FOUND')
      assert.match(e.message, /fbx-test:nope/)
      return true
    })
    await assert.rejects(Sandbox.create({ ...host().conn, template: `${PREFIX}-nopython` }), (e: unknown) => {
      assert.ok(e instanceof ForkboxError, String(e))
      assert.equal(e.code, 'VALIDATION_FAILED')
      assert.match(e.message, /no \/usr\/bin\/python3/)
      return true
    })
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-tag` })
    assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  })

  it('a second build of the same digest does not pull again (the registry is gone by then)', async () => {
    const before = statSync(pulledLayout(digest)).mtimeMs
    stopRegistry()
    await using sbx = await Sandbox.create({ ...host().conn, template: `${PREFIX}-pinned` })
    assert.equal((await sbx.exec(['python3', '-c', 'print(6 * 7)'])).stdout, '42\n')
    assert.equal(statSync(pulledLayout(digest)).mtimeMs, before)
  })
})
