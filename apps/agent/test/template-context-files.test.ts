// The build context a build sees: .dockerignore applied, each COPY source's entries, and content hashes that key layers.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { hashSource, listContext, sourceEntries } from '../src/templates/context-files.ts'

const dir = mkdtempSync(join(tmpdir(), 'forkbox-context-'))
after(() => rmSync(dir, { recursive: true, force: true }))
mkdirSync(join(dir, 'app/sub'), { recursive: true })
writeFileSync(join(dir, '.dockerignore'), 'secret.txt\n**/*.log\n!app/keep.log\n')
writeFileSync(join(dir, 'secret.txt'), 's')
writeFileSync(join(dir, 'app/main.py'), 'print(1)\n')
writeFileSync(join(dir, 'app/debug.log'), 'x')
writeFileSync(join(dir, 'app/keep.log'), 'k')
writeFileSync(join(dir, 'app/sub/data.txt'), 'd')
writeFileSync(join(dir, 'top.txt'), 't')
symlinkSync('main.py', join(dir, 'app/link'))

describe('build context', () => {
  it('lists entries without following links, minus what .dockerignore excludes', () => {
    const entries = listContext(dir)
    assert.deepEqual(
      entries.map((e) => `${e.path}:${e.kind}`),
      [
        '.dockerignore:file',
        'app:dir',
        'app/keep.log:file',
        'app/link:link',
        'app/main.py:file',
        'app/sub:dir',
        'app/sub/data.txt:file',
        'top.txt:file',
      ],
    )
  })

  it('a source takes its own entry and everything under it; patterns stay in one directory', () => {
    const entries = listContext(dir)
    const paths = (s: string) => sourceEntries(entries, s).map((e) => e.path)
    assert.deepEqual(paths('app/sub'), ['app/sub', 'app/sub/data.txt'])
    assert.deepEqual(paths('app/sub/'), ['app/sub', 'app/sub/data.txt'])
    assert.deepEqual(paths('*.txt'), ['top.txt'])
    assert.deepEqual(paths('app/m*.py'), ['app/main.py'])
    assert.equal(paths('.').length, entries.length)
  })

  it('the hash changes with a file the source takes, and only then', () => {
    const before = { app: hashSource(dir, listContext(dir), 'app'), top: hashSource(dir, listContext(dir), 'top.txt') }
    writeFileSync(join(dir, 'app/sub/data.txt'), 'changed')
    assert.notEqual(hashSource(dir, listContext(dir), 'app'), before.app)
    assert.equal(hashSource(dir, listContext(dir), 'top.txt'), before.top)
    // an ignored file changing changes nothing
    const now = hashSource(dir, listContext(dir), 'app')
    writeFileSync(join(dir, 'app/debug.log'), 'more')
    assert.equal(hashSource(dir, listContext(dir), 'app'), now)
  })
})
