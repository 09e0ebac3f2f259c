// Where forks' transient images go: a tmpfs dir of the data dir's own, never one someone else made.
import assert from 'node:assert/strict'
import { chmodSync, lstatSync, mkdirSync, rmSync, statfsSync, symlinkSync } from 'node:fs'
import { describe, it } from 'node:test'
import { forkScratchDir } from '../src/sandboxes/checkpoints.ts'

const tmpfs = statfsSync('/dev/shm').type === 0x01021994

describe('fork scratch dir', () => {
  it('is a 0700 dir of its own on /dev/shm, one per data dir', { skip: !tmpfs && 'no tmpfs at /dev/shm' }, () => {
    const a = forkScratchDir(`/tmp/fbx-scratch-a-${process.pid}`, '/fallback')
    const b = forkScratchDir(`/tmp/fbx-scratch-b-${process.pid}`, '/fallback')
    try {
      assert.match(a, /^\/dev\/shm\/forkbox-forks-[0-9a-f]{12}$/)
      assert.notEqual(a, b)
      assert.equal(lstatSync(a).mode & 0o777, 0o700)
      assert.equal(forkScratchDir(`/tmp/fbx-scratch-a-${process.pid}`, '/fallback'), a, 'the same dir again')
    } finally {
      rmSync(a, { recursive: true, force: true })
      rmSync(b, { recursive: true, force: true })
    }
  })

  it('falls back when the name is a link or a dir others can write', { skip: !tmpfs && 'no tmpfs at /dev/shm' }, () => {
    const dataDir = `/tmp/fbx-scratch-c-${process.pid}`
    const dir = forkScratchDir(dataDir, '/fallback')
    rmSync(dir, { recursive: true, force: true })
    try {
      symlinkSync('/tmp', dir)
      assert.equal(forkScratchDir(dataDir, '/fallback'), '/fallback')
      rmSync(dir)
      mkdirSync(dir)
      chmodSync(dir, 0o777)
      assert.equal(forkScratchDir(dataDir, '/fallback'), '/fallback')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
