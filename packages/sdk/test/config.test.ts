import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import {
  AuthenticationError,
  credentialsPath,
  DEFAULT_URL,
  readCredentials,
  requireApiKey,
  resolveConfig,
  Sandbox,
  writeCredentials,
} from '../src/index.ts'
import { useTestServer } from './server.ts'

let dir: string

function writeFile(content: string): void {
  mkdirSync(join(dir, 'forkbox'), { recursive: true })
  writeFileSync(join(dir, 'forkbox', 'credentials.json'), content)
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'forkbox-sdk-config-'))
})
afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('credentialsPath', () => {
  it('uses XDG_CONFIG_HOME when it is absolute', () => {
    assert.equal(credentialsPath({ env: { XDG_CONFIG_HOME: '/x/cfg' } }), '/x/cfg/forkbox/credentials.json')
  })
  it('falls back to ~/.config, ignoring a relative XDG_CONFIG_HOME', () => {
    assert.equal(credentialsPath({ env: { HOME: '/home/u' } }), '/home/u/.config/forkbox/credentials.json')
    assert.equal(
      credentialsPath({ env: { HOME: '/home/u', XDG_CONFIG_HOME: 'rel' } }),
      '/home/u/.config/forkbox/credentials.json',
    )
  })
})

describe('resolveConfig', () => {
  it('prefers explicit options over env over the credentials file', () => {
    writeFile(JSON.stringify({ url: 'http://file:1', apiKey: 'fbx_file' }))
    const env = { XDG_CONFIG_HOME: dir, FORKBOX_API_KEY: 'fbx_env', FORKBOX_URL: 'http://env:2' }
    assert.deepEqual([resolveConfig({ env }).apiKey, resolveConfig({ env }).url], ['fbx_env', 'http://env:2'])
    const explicit = resolveConfig({ env, apiKey: 'fbx_opt', url: 'http://opt:3/' })
    assert.equal(explicit.apiKey, 'fbx_opt')
    assert.equal(explicit.url, 'http://opt:3')
    const fileOnly = resolveConfig({ env: { XDG_CONFIG_HOME: dir } })
    assert.equal(fileOnly.apiKey, 'fbx_file')
    assert.equal(fileOnly.url, 'http://file:1')
  })

  it('resolves each field on its own and ignores empty env values', () => {
    writeFile(JSON.stringify({ apiKey: 'fbx_file' }))
    const config = resolveConfig({ env: { XDG_CONFIG_HOME: dir, FORKBOX_API_KEY: '', FORKBOX_URL: 'http://env:2' } })
    assert.equal(config.apiKey, 'fbx_file')
    assert.equal(config.url, 'http://env:2')
  })

  it('defaults the URL and leaves the key undefined when nothing is configured', () => {
    const config = resolveConfig({ env: { XDG_CONFIG_HOME: dir } })
    assert.equal(config.url, DEFAULT_URL)
    assert.equal(config.apiKey, undefined)
    assert.throws(
      () => requireApiKey(config),
      (err: unknown) => {
        assert.ok(err instanceof AuthenticationError)
        assert.equal(err.code, 'UNAUTHENTICATED')
        assert.match(err.message, /FORKBOX_API_KEY/)
        assert.ok(err.message.includes(join(dir, 'forkbox', 'credentials.json')))
        return true
      },
    )
  })

  it('reports a malformed credentials file only when the key is still missing', () => {
    writeFile('{not json')
    const config = resolveConfig({ env: { XDG_CONFIG_HOME: dir } })
    assert.throws(() => requireApiKey(config), /not valid JSON/)
    assert.equal(resolveConfig({ env: { XDG_CONFIG_HOME: dir, FORKBOX_API_KEY: 'fbx_env' } }).apiKey, 'fbx_env')
  })
})

describe('writeCredentials', () => {
  it('writes mode 0600 and merges, keeping the stored key when none is given', () => {
    const opts = { env: { XDG_CONFIG_HOME: dir } }
    const path = writeCredentials({ url: 'http://a:1', apiKey: 'fbx_one' }, opts)
    assert.equal(statSync(path).mode & 0o777, 0o600)
    writeCredentials({ url: 'http://b:2' }, opts)
    assert.deepEqual(readCredentials(opts), { url: 'http://b:2', apiKey: 'fbx_one' })
    writeCredentials({ url: 'http://b:2', apiKey: 'fbx_two' }, opts)
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), { url: 'http://b:2', apiKey: 'fbx_two' })
  })

  it('replaces a malformed file', () => {
    writeFile('[')
    const opts = { env: { XDG_CONFIG_HOME: dir } }
    writeCredentials({ url: 'http://a:1' }, opts)
    assert.deepEqual(readCredentials(opts), { url: 'http://a:1' })
  })
})

describe('SDK entry points', () => {
  const server = useTestServer()

  it('fail with AuthenticationError before any request when no key is found', async () => {
    const saved = { ...process.env }
    process.env.XDG_CONFIG_HOME = dir
    delete process.env.FORKBOX_API_KEY
    try {
      const s = server()
      await assert.rejects(Sandbox.create({ fetch: s.fetch }), AuthenticationError)
      assert.equal(s.requests.length, 0)
    } finally {
      process.env = saved
    }
  })

  it('refuse a key with characters a key cannot have, before any request, as an AuthenticationError', async () => {
    const s = server()
    // U+20AC makes fetch throw before connecting (not ISO-8859-1); U+00E9, a space and a newline do not all,
    // but no key holds them
    for (const [apiKey, what] of [
      [`${s.apiKey}\u20ac`, /non-ASCII character \(U\+20AC at position \d+\)/],
      [`é${s.apiKey}`, /non-ASCII character \(U\+00E9 at position 1\)/],
      [`${s.apiKey} `, /space or control character \(U\+0020/],
      [`${s.apiKey}\n`, /space or control character \(U\+000A/],
    ] as const) {
      const err = await Sandbox.create({ apiKey, fetch: s.fetch }).catch((e: unknown) => e)
      assert.ok(err instanceof AuthenticationError, String(err))
      assert.equal(err.code, 'UNAUTHENTICATED')
      assert.match(err.message, what)
      assert.match(err.message, /which a key cannot have/)
      assert.ok(!err.message.includes(s.apiKey), 'the key itself is not in the message')
    }
    assert.equal(s.requests.length, 0)
    // through the real fetch too: not a CONNECTION_ERROR although nothing listens there
    await assert.rejects(
      Sandbox.list({ apiKey: 'fbx_\u20ac', url: 'http://127.0.0.1:9' }),
      (err: unknown) => err instanceof AuthenticationError && err.code === 'UNAUTHENTICATED',
    )
    // a well-formed key passes as before
    assert.equal(requireApiKey(resolveConfig({ apiKey: 'fbx_A-z.0~9' })), 'fbx_A-z.0~9')
  })

  it('use the credentials file from process.env', async () => {
    const saved = { ...process.env }
    process.env.XDG_CONFIG_HOME = dir
    delete process.env.FORKBOX_API_KEY
    delete process.env.FORKBOX_URL
    const s = server()
    writeFile(JSON.stringify({ url: 'http://file.test:9', apiKey: s.apiKey }))
    try {
      assert.deepEqual(await Sandbox.list({ fetch: s.fetch }), [])
      assert.equal(s.requests[0]?.url.origin, 'http://file.test:9')
      assert.equal(s.requests[0]?.headers.get('authorization'), `Bearer ${s.apiKey}`)
    } finally {
      process.env = saved
    }
  })
})
