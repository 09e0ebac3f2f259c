// filterContext: .dockerignore by Docker's rules.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { filterContext } from '../src/templates/dockerignore.ts'

const paths = [
  'Dockerfile',
  'app.py',
  'debug.log',
  'logs/a.log',
  'logs/keep.log',
  'node_modules/x/index.js',
  'src/node_modules/y.js',
  'src/main.py',
  'src/tmp',
  'src/deep/tmp',
  '.git/HEAD',
  'secret.env',
]

describe('filterContext', () => {
  it('keeps everything without a .dockerignore', () => {
    assert.deepEqual(filterContext(paths, undefined), paths)
  })

  it('roots patterns at the context, * in one directory, ** across many, ! re-includes', () => {
    const ignore = [
      '# comments and blank lines are skipped',
      '',
      '/node_modules',
      '**/*.log',
      '!logs/keep.log',
      '*/tmp',
      '.git',
      'secret.*',
    ].join('\n')
    assert.deepEqual(filterContext(paths, ignore), [
      'Dockerfile',
      'app.py',
      'logs/keep.log',
      'src/node_modules/y.js',
      'src/main.py',
      'src/deep/tmp',
    ])
  })

  it('lets the last matching line win', () => {
    assert.deepEqual(filterContext(['a.txt', 'b.txt'], '!a.txt\n*.txt'), [])
    assert.deepEqual(filterContext(['a.txt', 'b.txt'], '*.txt\n!a.txt'), ['a.txt'])
  })

  it('re-includes a file inside an excluded directory, as Docker (unlike git) does', () => {
    assert.deepEqual(filterContext(['build/out.bin', 'build/keep.txt'], 'build\n!build/keep.txt'), ['build/keep.txt'])
  })
})
