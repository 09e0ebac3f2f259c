// An image's own config, read from its OCI layout in the pull cache: what a template takes of it,
// and layouts that try to make the agent read outside them.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { readImageConfig, userNameOf } from '../src/templates/oci.ts'

const root = mkdtempSync(join(tmpdir(), 'forkbox-oci-config-'))
after(() => rmSync(root, { recursive: true, force: true }))

/** A layout whose image config is `config`; `manifestDigest` overrides what index.json names. */
function layout(config: unknown, manifestDigest?: string): string {
  const dir = mkdtempSync(join(root, 'layout-'))
  const blobs = join(dir, 'blobs', 'sha256')
  mkdirSync(blobs, { recursive: true })
  const put = (value: unknown) => {
    const bytes = Buffer.from(JSON.stringify(value))
    const hex = createHash('sha256').update(bytes).digest('hex')
    writeFileSync(join(blobs, hex), bytes)
    return `sha256:${hex}`
  }
  const manifest = put({ schemaVersion: 2, config: { digest: put(config) }, layers: [] })
  writeFileSync(join(dir, 'index.json'), JSON.stringify({ manifests: [{ digest: manifestDigest ?? manifest }] }))
  return dir
}

describe("an image's config", () => {
  it('gives its Env, WorkingDir and User as Docker reads them', () => {
    const dir = layout({
      config: {
        Env: ['PATH=/usr/local/go/bin:/usr/bin:/bin', 'EMPTY=', 'WITH_EQ=a=b', 'NOEQUALS', 42],
        WorkingDir: '/srv/app',
        User: 'node:node',
        Cmd: ['bash'],
      },
    })
    assert.deepEqual(readImageConfig(dir), {
      env: { PATH: '/usr/local/go/bin:/usr/bin:/bin', EMPTY: '', WITH_EQ: 'a=b' },
      workdir: '/srv/app',
      user: 'node:node',
    })
  })

  it('of an image that sets nothing is empty', () => {
    assert.deepEqual(readImageConfig(layout({ architecture: 'amd64' })), {
      env: {},
      workdir: undefined,
      user: undefined,
    })
    assert.deepEqual(readImageConfig(layout({ config: { WorkingDir: '', User: 7 } })), {
      env: {},
      workdir: undefined,
      user: undefined,
    })
  })

  it('is never read through a digest that names a path outside the layout', () => {
    for (const digest of ['sha256:../../../etc/passwd', `sha512:${'a'.repeat(128)}`, 'nope', '']) {
      assert.throws(
        () => readImageConfig(layout({}, digest)),
        (e: unknown) => e instanceof AppError && e.code === 'VALIDATION_FAILED' && /malformed digest/.test(e.message),
        digest,
      )
    }
  })

  it('that is not JSON is a clear error', () => {
    const dir = layout({})
    writeFileSync(join(dir, 'index.json'), 'not json')
    assert.throws(
      () => readImageConfig(dir),
      (e: unknown) => e instanceof AppError && /config cannot be read/.test(e.message),
    )
  })

  it("names a sandbox's default user only when its USER is a user name", () => {
    assert.equal(userNameOf('node'), 'node')
    assert.equal(userNameOf('app:staff'), 'app')
    assert.equal(userNameOf('1000'), undefined)
    assert.equal(userNameOf('1000:1000'), undefined)
    assert.equal(userNameOf(''), undefined)
    assert.equal(userNameOf(undefined), undefined)
    assert.equal(userNameOf('Bad Name'), undefined)
  })
})
