// The guest's own Python runs where nothing else is: in a root holding only the runtime, ignoring
// the loader variables an image could set.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { installGuestRuntime, RUNTIME_MOUNT, RUNTIME_PYTHON } from '../src/guest/runtime.ts'

const root = mkdtempSync(join(tmpdir(), 'fbx-runtime-'))
after(() => rmSync(root, { recursive: true, force: true }))

describe('the guest runtime', () => {
  it('is assembled once per interpreter and runs the stdlib the guest uses in an otherwise empty root', () => {
    const templates = join(root, 'templates')
    const a = installGuestRuntime(templates, '/usr/bin/python3')
    assert.deepEqual(installGuestRuntime(templates, '/usr/bin/python3'), a)
    assert.ok(!existsSync(join(a.dir, 'lib/python3.11/test')), 'the stdlib tests are left out')
    const jail = join(root, 'jail')
    mkdirSync(join(jail, RUNTIME_MOUNT), { recursive: true })
    cpSync(a.dir, join(jail, RUNTIME_MOUNT), { recursive: true, preserveTimestamps: true })
    const code = [
      'import sys, os, json, socket, select, pty, termios, fcntl, signal, hashlib, tarfile, zlib, base64, pwd',
      'print(sys.prefix, sys.executable, hashlib.sha256(b"forkbox").hexdigest()[:12], os.path.exists("/usr"))',
    ].join('\n')
    const out = execFileSync('/usr/sbin/chroot', [jail, RUNTIME_PYTHON, '-S', '-c', code], {
      encoding: 'utf8',
      // what an image's environment could hold must not steer the guest's loader
      env: { LD_LIBRARY_PATH: '/nonexistent', PATH: '/nonexistent' },
    }).trim()
    const digest = createHash('sha256').update('forkbox').digest('hex').slice(0, 12)
    assert.equal(out, `${RUNTIME_MOUNT} ${RUNTIME_PYTHON} ${digest} False`)
  })
})
