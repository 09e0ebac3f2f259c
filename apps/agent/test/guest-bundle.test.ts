import assert from 'node:assert/strict'
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { readGuestBundle } from '../src/guest/bundle.ts'

const guestDir = fileURLToPath(new URL('../../guest', import.meta.url))

describe('guest bundle', () => {
  it('holds every module of the guest package, the kernels and the programs, and nothing else', () => {
    const files = readGuestBundle(guestDir).files
    const names = files.map((f) => f.name)
    for (const name of ['forkbox_guest/__main__.py', 'forkbox_guest/spawner.py', 'forkbox_guest/dispatch.py'])
      assert.ok(names.includes(name), name)
    assert.ok(names.includes('forkbox_kernel.py') && names.includes('forkbox_kernel.cjs'))
    // programs are executable (the templates' /usr/bin/sudo links to this one); modules are not
    assert.equal(files.find((f) => f.name === 'forkbox_sudo.py')?.mode, 0o755)
    assert.equal(files.find((f) => f.name === 'forkbox_kernel.py')?.mode, 0o644)
    assert.ok(
      names.every((n) => !n.startsWith('tests/') && !n.includes('__pycache__')),
      names.join(' '),
    )
  })

  it('changes its hash when any module changes or is added', () => {
    const dir = mkdtempSync(join(tmpdir(), 'guest-bundle-'))
    try {
      cpSync(guestDir, dir, { recursive: true })
      const before = readGuestBundle(dir).hash
      assert.equal(readGuestBundle(dir).hash, before)
      writeFileSync(join(dir, 'forkbox_guest/ioloop.py'), '# changed\n', { flag: 'a' })
      const edited = readGuestBundle(dir).hash
      assert.notEqual(edited, before)
      writeFileSync(join(dir, 'forkbox_guest/extra.py'), '')
      const added = readGuestBundle(dir).hash
      assert.notEqual(added, edited)
      // a cache of compiled modules is not part of the guest
      writeFileSync(join(dir, 'forkbox_guest/extra.pyc'), 'x')
      assert.equal(readGuestBundle(dir).hash, added)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
