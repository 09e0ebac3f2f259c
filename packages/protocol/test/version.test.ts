// forkbox's version is written once (version.ts); every package's manifest and the Python SDK must say the same.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { FORKBOX_VERSION } from '../src/version.ts'

const root = new URL('../../../', import.meta.url).pathname

describe('one version', () => {
  it('is semver, and every package.json, pyproject.toml and the Python package say it', () => {
    assert.match(FORKBOX_VERSION, /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/)
    const manifests = ['packages', 'apps']
      .flatMap((d) => readdirSync(join(root, d)).map((p) => join(root, d, p, 'package.json')))
      .filter((m) => existsSync(m)) // apps/guest is Python
    assert.ok(manifests.length >= 7)
    for (const m of manifests) assert.equal(JSON.parse(readFileSync(m, 'utf8')).version, FORKBOX_VERSION, m)
    const pyproject = readFileSync(join(root, 'python/pyproject.toml'), 'utf8')
    assert.equal(/^version = "([^"]+)"$/m.exec(pyproject)?.[1], FORKBOX_VERSION, 'python/pyproject.toml')
    const init = readFileSync(join(root, 'python/forkbox/__init__.py'), 'utf8')
    assert.equal(/^__version__ = "([^"]+)"$/m.exec(init)?.[1], FORKBOX_VERSION, 'python/forkbox/__init__.py')
  })
})
