// Image references: Docker's reading of them, the ones refused, and which registries may be plain HTTP.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { formatImageReference, parseImageReference, registryIsInsecure } from '../src/templates/image-ref.ts'
import { classifyRegistryFailure } from '../src/templates/oci.ts'

const DIGEST = `sha256:${'a'.repeat(64)}`

describe('image references', () => {
  it('reads them as Docker does', () => {
    assert.deepEqual(parseImageReference('python:3.12-slim'), {
      registry: 'docker.io',
      repository: 'library/python',
      tag: '3.12-slim',
      digest: null,
    })
    assert.deepEqual(parseImageReference('team/img'), {
      registry: 'docker.io',
      repository: 'team/img',
      tag: 'latest',
      digest: null,
    })
    assert.deepEqual(parseImageReference(`registry.example.com/team/img:tag@${DIGEST}`), {
      registry: 'registry.example.com',
      repository: 'team/img',
      tag: 'tag',
      digest: DIGEST,
    })
    assert.deepEqual(parseImageReference('localhost:5000/x'), {
      registry: 'localhost:5000',
      repository: 'x',
      tag: 'latest',
      digest: null,
    })
    assert.equal(parseImageReference(`localhost/x@${DIGEST}`).tag, null)
  })

  it('names the digest when pinned, else the tag', () => {
    const r = parseImageReference('127.0.0.1:5000/a/b:1')
    assert.equal(formatImageReference(r), '127.0.0.1:5000/a/b:1')
    assert.equal(formatImageReference(r, DIGEST), `127.0.0.1:5000/a/b@${DIGEST}`)
  })

  for (const bad of [
    '--src-creds=a:b',
    '-x',
    '',
    'UPPER/case',
    'a b',
    'x:tag:more',
    'x@sha256:short',
    'x@md5:aaaa',
    'docker://x',
    'oci:/tmp/x:tag',
    'x;rm -rf /',
    'host:99999/x',
    `${'a'.repeat(300)}`,
  ]) {
    it(`refuses ${JSON.stringify(bad.slice(0, 30))}`, () => {
      assert.throws(
        () => parseImageReference(bad),
        (e) => e instanceof AppError && e.code === 'VALIDATION_FAILED',
      )
    })
  }
})

describe('insecure registries', () => {
  it('lets loopback names speak plain HTTP on any port', () => {
    assert.equal(registryIsInsecure('localhost:5000', []), true)
    assert.equal(registryIsInsecure('127.0.0.1:41234', []), true)
    assert.equal(registryIsInsecure('localhost', []), true)
  })

  it('verifies every other registry unless the operator lists it', () => {
    assert.equal(registryIsInsecure('docker.io', []), false)
    assert.equal(registryIsInsecure('localhost.example.com:5000', []), false)
    assert.equal(registryIsInsecure('10.0.0.5:5000', []), false)
    assert.equal(registryIsInsecure('10.0.0.5:5000', ['10.0.0.5:5000']), true)
    assert.equal(registryIsInsecure('reg.lan:443', ['reg.lan']), true)
    assert.equal(registryIsInsecure('reg.lan:443', ['other.lan']), false)
  })
})

describe("skopeo's failures", () => {
  const code = (stderr: string, timedOut = false) => classifyRegistryFailure('img', stderr, timedOut).code
  const fatal = (msg: string) => `time="2026-01-01T00:00:00Z" level=fatal msg="${msg}"`

  it('tell a missing image or tag', () => {
    assert.equal(
      code(
        fatal(
          'Error parsing image name \\"docker://h/x:nope\\": reading manifest nope in h/x: manifest unknown: manifest unknown',
        ),
      ),
      'IMAGE_NOT_FOUND',
    )
  })

  it('tell an unreachable registry', () => {
    assert.equal(
      code(fatal('pinging container registry h: Get "http://h/v2/": dial tcp h: connect: connection refused')),
      'REGISTRY_UNREACHABLE',
    )
    assert.equal(
      code(fatal('pinging container registry h: http: server gave HTTP response to HTTPS client')),
      'REGISTRY_UNREACHABLE',
    )
    assert.equal(code('', true), 'REGISTRY_UNREACHABLE')
  })

  it('tell refused credentials', () => {
    assert.equal(
      code(fatal('reading manifest 1 in h/x: unauthorized: authentication required')),
      'REGISTRY_AUTH_FAILED',
    )
    assert.equal(code(fatal('requested access to the resource is denied')), 'REGISTRY_AUTH_FAILED')
  })
})
