// The layer cache's pure parts: which layer provides a path (whiteouts, symlinked dirs), which steps run, temp names.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type KindOf, providerOf } from '../src/templates/flatten.ts'
import { firstMissing, tempName, tempOwner } from '../src/templates/layers.ts'

type Kind = 'dir' | 'file' | 'link' | 'whiteout'

/** A fake `kindOf` over layers given as `{ '/layer/path': kind }`. */
function fakeLstat(tree: Record<string, Kind>): KindOf {
  return (path) => {
    const kind = tree[path]
    if (!kind) return null
    return kind === 'dir' || kind === 'whiteout' ? kind : 'other'
  }
}

describe('providerOf', () => {
  const layers = ['/up', '/mid', '/base']

  it('is the topmost layer holding the path', () => {
    const lstat = fakeLstat({
      '/up/etc': 'dir',
      '/up/etc/motd': 'file',
      '/mid/etc': 'dir',
      '/mid/etc/motd': 'file',
      '/base/etc': 'dir',
      '/base/etc/passwd': 'file',
    })
    assert.equal(providerOf('etc/motd', layers, lstat), 0)
    assert.equal(providerOf('etc/passwd', layers, lstat), 2)
    assert.equal(providerOf('etc/nothing', layers, lstat), null)
  })

  it('stops at a whiteout: the lower copy is deleted', () => {
    const lstat = fakeLstat({
      '/up/etc': 'dir',
      '/up/etc/motd': 'whiteout',
      '/base/etc': 'dir',
      '/base/etc/motd': 'file',
    })
    assert.equal(providerOf('etc/motd', layers, lstat), null)
  })

  it('stops at a whiteout of a parent dir', () => {
    const lstat = fakeLstat({ '/up/opt': 'whiteout', '/base/opt': 'dir', '/base/opt/x': 'file' })
    assert.equal(providerOf('opt/x', layers, lstat), null)
  })

  it('never goes through a symlinked dir of a layer (on the host it leads out of the layer)', () => {
    // the middle layer made /etc a link to the host's /etc; the base has a real etc/shadow
    const lstat = fakeLstat({ '/mid/etc': 'link', '/base/etc': 'dir', '/base/etc/shadow': 'file' })
    assert.equal(providerOf('etc/shadow', layers, lstat), null)
    // and a link in the layer that has the path hides it the same way
    const top = fakeLstat({ '/up/etc': 'link', '/up/etc/shadow': 'file' })
    assert.equal(providerOf('etc/shadow', layers, top), null)
  })

  it('a symlink itself is provided (linked, not followed)', () => {
    const lstat = fakeLstat({ '/mid/bin': 'link' })
    assert.equal(providerOf('bin', layers, lstat), 1)
  })
})

describe('layer chain selection', () => {
  it('reuses the cached prefix and runs from the first missing key', () => {
    const have = new Set(['a', 'b'])
    assert.equal(
      firstMissing(['a', 'b', 'c', 'd'], (k) => have.has(k)),
      2,
    )
    assert.equal(
      firstMissing(['a', 'b'], (k) => have.has(k)),
      2,
    )
    assert.equal(
      firstMissing(['x', 'a'], (k) => have.has(k)),
      0,
    )
  })

  it('names temp dirs by owner pid, uniquely', () => {
    const a = tempName(4242)
    assert.equal(tempOwner(a), 4242)
    assert.notEqual(a, tempName(4242))
    assert.equal(tempOwner('0123abcd'), null)
    assert.equal(tempOwner('shim-1'), null)
  })
})
