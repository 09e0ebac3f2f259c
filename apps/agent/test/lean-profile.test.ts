// The templates' /etc/profile asks no subprocess for the user under bash, and sets what Debian's does.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { leanProfile } from '../src/templates/build.ts'

describe('lean /etc/profile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fbx-profile-'))
  chmodSync(dir, 0o755)
  after(() => rmSync(dir, { recursive: true, force: true }))

  it("Debian's profile: no `id -u` under bash, the same PATH as before for root and a user", () => {
    const original = join(dir, 'profile.orig')
    const lean = join(dir, 'profile')
    copyFileSync('/etc/profile', original)
    copyFileSync('/etc/profile', lean)
    leanProfile(lean)
    const text = readFileSync(lean, 'utf8')
    assert.ok(readFileSync(original, 'utf8').includes('"$(id -u)"'), "Debian's profile asks id -u")
    assert.ok(!text.includes('"$(id -u)"'))
    // what each sets, as root and as nobody (the file read, not the system's)
    const path = (file: string, user: string) =>
      execFileSync(
        'setpriv',
        [
          ...(user === 'root' ? [] : ['--reuid=65534', '--regid=65534', '--clear-groups']),
          'bash',
          '-c',
          `. ${file}; echo "$PATH"`,
        ],
        { env: {} },
      ).toString()
    assert.equal(path(lean, 'root'), path(original, 'root'))
    assert.equal(path(lean, 'root'), '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n')
    assert.equal(path(lean, 'nobody'), path(original, 'nobody'))
    assert.equal(path(lean, 'nobody'), '/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\n')
    // sh (dash) has no $EUID: it still asks, and gets the same answer
    assert.equal(
      execFileSync('sh', ['-c', `. ${lean}; echo "$PATH"`], { env: {} }).toString(),
      execFileSync('sh', ['-c', `. ${original}; echo "$PATH"`], { env: {} }).toString(),
    )
  })

  it('a profile without the question is left as it was', () => {
    const file = join(dir, 'other')
    copyFileSync('/etc/hostname', file)
    const before = readFileSync(file, 'utf8')
    leanProfile(file)
    leanProfile(join(dir, 'missing'))
    assert.equal(readFileSync(file, 'utf8'), before)
  })
})
