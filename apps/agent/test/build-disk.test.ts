// The build's bounded scratch disks on the real kernel (loop-mounted ext4, overlayfs; needs root):
// a step's layer made on one keeps what overlayfs records (whiteouts, opaque dirs, owners, links)
// once copied into the store; a write past the bound is ENOSPC there, and the layer's owner and
// bytes are recorded for per-key eviction.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { boundError, freeBytesOf, openWriteArea, ScratchDisk, tighter } from '../src/templates/build-disk.ts'
import { LayerStore } from '../src/templates/layers.ts'

const work = mkdtempSync(join(tmpdir(), 'forkbox-build-disk-'))
after(() => rmSync(work, { recursive: true, force: true }))

function mounts(under: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.startsWith(under))
}

function xattr(path: string, name: string): string | null {
  try {
    return execFileSync('python3', [
      '-c',
      'import os,sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())',
      path,
      name,
    ])
      .toString()
      .trim()
  } catch {
    return null
  }
}

describe('ScratchDisk', () => {
  it('bounds what is written on it: ENOSPC past its size, the host untouched beyond it', async () => {
    const parent = join(work, 'bounded')
    mkdirSync(parent)
    const disk = await ScratchDisk.make(parent, 32 * 1024 * 1024, 'a test')
    try {
      assert.equal(mounts(parent).length, 1)
      const before = freeBytesOf(work)
      // 64 MiB into a 32 MiB disk: dd stops at ENOSPC
      assert.throws(
        () =>
          execFileSync('dd', ['if=/dev/zero', `of=${join(disk.dir, 'big')}`, 'bs=1M', 'count=64'], { stdio: 'pipe' }),
        /No space left on device/,
      )
      assert.ok(disk.full())
      assert.ok(before - freeBytesOf(work) < 40 * 1024 * 1024, 'the host gave at most the bound')
    } finally {
      await disk.release()
    }
    assert.deepEqual(mounts(parent), [])
    assert.deepEqual(readdirSync(parent), [])
  })

  it('is refused with NO_SPACE when the host has not the bound to give', async () => {
    const parent = join(work, 'too-big')
    mkdirSync(parent)
    await assert.rejects(ScratchDisk.make(parent, freeBytesOf(work) + 1024 ** 3, 'RUN x (line 2)'), (err: unknown) => {
      assert.ok(err instanceof AppError)
      assert.equal(err.code, 'NO_SPACE')
      assert.match(err.message, /^RUN x \(line 2\): the host has/)
      return true
    })
    assert.deepEqual(readdirSync(parent), [])
  })
})

describe('a write area', () => {
  it('is its fallback itself with no bound', async () => {
    const parent = join(work, 'area-none')
    const fallback = join(work, 'area-none-out')
    const area = await openWriteArea({ maxBytes: undefined, parent, fallback, what: 'a test' })
    assert.equal(area.dir, fallback)
    assert.equal(area.full(), false)
    await area.keep()
    await area.release()
    assert.ok(!existsSync(parent), 'no scratch disk, no parent made for it')
  })

  it('bounded, writes on a scratch disk in a parent it makes, and keeps what was written at its fallback', async () => {
    const parent = join(work, 'area-bounded')
    const fallback = join(work, 'area-bounded-out')
    const area = await openWriteArea({ maxBytes: 24 * 1024 * 1024, parent, fallback, what: 'a test' })
    assert.notEqual(area.dir, fallback)
    assert.equal(mounts(parent).length, 1)
    mkdirSync(area.dir)
    writeFileSync(join(area.dir, 'kept'), 'x')
    assert.throws(
      () => execFileSync('dd', ['if=/dev/zero', `of=${join(area.dir, 'big')}`, 'bs=1M', 'count=48'], { stdio: 'pipe' }),
      /No space left on device/,
    )
    assert.ok(area.full())
    rmSync(join(area.dir, 'big'))
    await area.keep()
    assert.equal(readFileSync(join(fallback, 'kept'), 'utf8'), 'x')
    assert.deepEqual(mounts(parent), [])
    assert.ok(!existsSync(parent), 'the parent it made goes with the disk')
    assert.equal(area.full(), false)
    await area.release()
  })

  it('leaves a parent it did not make, and takes its disk down on release', async () => {
    const parent = join(work, 'area-given')
    mkdirSync(parent)
    const area = await openWriteArea({
      maxBytes: 24 * 1024 * 1024,
      parent,
      fallback: join(parent, 'diff'),
      what: 'a test',
    })
    await area.release()
    await area.release()
    assert.deepEqual(mounts(parent), [])
    assert.deepEqual(readdirSync(parent), [])
  })

  it('refused with NO_SPACE, removes the parent it made', async () => {
    const parent = join(work, 'area-too-big')
    const bytes = freeBytesOf(work) + 1024 ** 3
    await assert.rejects(openWriteArea({ maxBytes: bytes, parent, fallback: join(work, 'x'), what: 'a test' }), {
      code: 'NO_SPACE',
    })
    assert.ok(!existsSync(parent))
  })
})

describe('a layer made on a scratch disk', () => {
  const templates = join(work, 'templates')
  mkdirSync(templates)
  const layers = new LayerStore(templates)
  const base = join(work, 'base')
  mkdirSync(join(base, 'etc/conf.d'), { recursive: true })
  writeFileSync(join(base, 'etc/motd'), 'hello\n')
  writeFileSync(join(base, 'etc/conf.d/a'), 'a\n')
  writeFileSync(join(base, 'etc/conf.d/b'), 'b\n')
  layers.addExternal('base', base)

  it("keeps overlayfs's whiteouts, opaque dirs, owners and links, and records its owner and bytes", async () => {
    await layers.makeStep(
      'step-1',
      'base',
      async (mount) => {
        // a step as a RUN would: delete a file, replace a dir wholesale, add a link and an owned file
        rmSync(join(mount.merged, 'etc/motd'))
        rmSync(join(mount.merged, 'etc/conf.d'), { recursive: true })
        mkdirSync(join(mount.merged, 'etc/conf.d'))
        writeFileSync(join(mount.merged, 'etc/conf.d/c'), 'c\n')
        symlinkSync('conf.d/c', join(mount.merged, 'etc/current'))
        writeFileSync(join(mount.merged, 'owned'), 'x')
        execFileSync('chown', ['1234:5678', join(mount.merged, 'owned')])
        assert.equal(mounts(templates).length, 2, 'the scratch disk and the overlay')
      },
      { maxBytes: 32 * 1024 * 1024, owner: 'key-a', what: 'RUN test' },
    )
    const diff = join(templates, '.layers', 'step-1', 'diff')
    const whiteout = lstatSync(join(diff, 'etc/motd'))
    assert.ok(whiteout.isCharacterDevice() && whiteout.rdev === 0, 'the whiteout of etc/motd')
    assert.equal(xattr(join(diff, 'etc/conf.d'), 'trusted.overlay.opaque'), 'y')
    assert.equal(readlinkSync(join(diff, 'etc/current')), 'conf.d/c')
    const owned = lstatSync(join(diff, 'owned'))
    assert.deepEqual([owned.uid, owned.gid], [1234, 5678])
    // mounted as the next step sees it: the deletions hold
    const view = await layers.mountReadOnly('step-1')
    try {
      assert.ok(!existsSync(join(view.dir, 'etc/motd')))
      assert.deepEqual(readdirSync(join(view.dir, 'etc/conf.d')), ['c'])
    } finally {
      await view.release()
    }
    assert.deepEqual(mounts(templates), [])
    const rec = JSON.parse(readFileSync(join(templates, '.layers', 'step-1', 'layer.json'), 'utf8'))
    assert.equal(rec.owner, 'key-a')
    assert.ok(rec.bytes > 0 && layers.bytesOf('step-1') === rec.bytes)
  })

  it('a step that fills its disk tells so, and leaves nothing behind', async () => {
    let full = false
    await assert.rejects(
      layers.makeStep(
        'step-full',
        'base',
        async (mount) => {
          try {
            execFileSync('dd', ['if=/dev/zero', `of=${join(mount.merged, 'big')}`, 'bs=1M', 'count=64'], {
              stdio: 'pipe',
            })
          } finally {
            full = mount.full()
          }
        },
        { maxBytes: 24 * 1024 * 1024, owner: 'key-a', what: 'RUN fill' },
      ),
    )
    assert.ok(full)
    assert.ok(!layers.has('step-full'))
    assert.deepEqual(mounts(templates), [])
    assert.deepEqual(
      readdirSync(join(templates, '.layers')).filter((n) => n.startsWith('tmp-')),
      [],
    )
  })

  it("evicts one key's layers down to its own bound, leaving other keys' alone", async () => {
    await layers.makeStep('step-b', 'base', async (m) => writeFileSync(join(m.merged, 'b'), 'b'.repeat(64 * 1024)), {
      maxBytes: 32 * 1024 * 1024,
      owner: 'key-b',
      what: 'RUN b',
    })
    const out = await layers.evict(0, 'key-a')
    assert.deepEqual(out.removed, ['step-1'])
    assert.ok(layers.has('step-b'))
    assert.ok(layers.has('base'))
  })
})

describe('bounds', () => {
  it('the tighter one wins, and its error names what set it', () => {
    const disk = { maxBytes: 256 * 1024 * 1024, by: 'disk' as const }
    const quota = { maxBytes: 100 * 1024 * 1024, by: 'quota' as const }
    assert.equal(tighter(disk, quota), quota)
    assert.equal(tighter(undefined, disk), disk)
    assert.equal(tighter(undefined, undefined), undefined)
    const q = boundError('RUN x (line 2)', quota)
    assert.equal(q.code, 'QUOTA_EXCEEDED')
    assert.equal(q.details?.quota, 'templateBytes')
    const d = boundError('RUN x (line 2)', disk)
    assert.equal(d.code, 'NO_SPACE')
    assert.match(d.message, /RUN x \(line 2\) wrote past the template's disk \(diskMB: 256 MiB\)/)
  })
})
