// envd's POST /files in-process (app.request) over a fake agent that keeps what it is sent: uploads
// are streamed part by part into the sandbox's write, bounded, and a bad body is the client's error.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import type { AgentSandbox, FileEntry, WriteOptions } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

const MAX_UPLOAD = 1024 * 1024

/** Keeps each write's path and bytes; `started` fires when a write has its first bytes. */
class RecordingAgent extends FakeAgent {
  files = new Map<string, Buffer>()
  failed: string[] = []
  onFirstBytes: (() => void) | null = null
  metadata = new Map<string, Record<string, string> | undefined>()
  protected override guestOf(id: string): AgentSandbox {
    return Object.assign(super.guestOf(id), {
      writeFile: (path: string, body: AsyncIterable<Uint8Array>, opts?: WriteOptions) => this.write(path, body, opts),
    })
  }
  private async write(path: string, body: AsyncIterable<Uint8Array>, opts?: WriteOptions): Promise<FileEntry> {
    this.metadata.set(path, opts?.metadata)
    const chunks: Buffer[] = []
    try {
      for await (const c of body) {
        if (chunks.length === 0) this.onFirstBytes?.()
        chunks.push(Buffer.from(c))
      }
    } catch (err) {
      this.failed.push(path)
      throw err
    }
    const data = Buffer.concat(chunks)
    this.files.set(path, data)
    const name = path.split('/').pop() ?? ''
    return { name, path, type: 'file', size: data.length, mode: 0o644, mtimeMs: 0, uid: 1000, gid: 1000 }
  }
}

let dir: string
let cp: ControlPlane
let agent: RecordingAgent
let sandbox: { sandboxID: string; envdAccessToken: string }

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-e2b-files-'))
  agent = new RecordingAgent()
  cp = await createControlPlane({
    agent,
    config: {
      dbPath: join(dir, 'db.sqlite'),
      logLevel: 'silent',
      reaperIntervalMs: 60_000,
      maxUploadBytes: MAX_UPLOAD,
    },
  })
  const key = (await cp.keys.create({ name: 'e2b', format: 'e2b' })).key
  const res = await cp.app.request('/v2/sandboxes', {
    method: 'POST',
    headers: { 'X-API-KEY': key, 'content-type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', timeout: 60 }),
  })
  assert.equal(res.status, 201)
  sandbox = await res.json()
})

afterEach(async () => {
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
})

const BOUNDARY = 'fbx-test-boundary'

function part(filename: string | null, data: Buffer | string, field = 'file'): Buffer {
  const disposition = `form-data; name="${field}"${filename === null ? '' : `; filename="${filename}"`}`
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\nContent-Type: application/octet-stream\r\n\r\n`,
    ),
    Buffer.from(data),
    Buffer.from('\r\n'),
  ])
}
const END = Buffer.from(`--${BOUNDARY}--\r\n`)

function upload(
  body: BodyInit,
  opts: { path?: string; type?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const query = opts.path ? `?path=${encodeURIComponent(opts.path)}` : ''
  return Promise.resolve(
    cp.app.request(`/files${query}`, {
      method: 'POST',
      body,
      // a stream body: no Content-Length, as a client streaming its upload sends it
      duplex: 'half',
      headers: {
        'E2b-Sandbox-Id': sandbox.sandboxID,
        'E2b-Sandbox-Port': '49983',
        'X-Access-Token': sandbox.envdAccessToken,
        'content-type': opts.type ?? `multipart/form-data; boundary=${BOUNDARY}`,
        ...opts.headers,
      },
    } as RequestInit),
  )
}

/** A body sent in pieces; each piece waits for `gate` (if given) before it goes. */
function streamOf(pieces: Buffer[], gates: (Promise<void> | null)[] = []): ReadableStream<Uint8Array> {
  let i = 0
  return new ReadableStream({
    async pull(controller) {
      await gates[i]
      const next = pieces[i++]
      if (next) controller.enqueue(new Uint8Array(next))
      else controller.close()
    },
  })
}

async function errorOf(res: Response): Promise<{ status: number; code: number; errorCode: string; message: string }> {
  const body = (await res.json()) as { code: number; errorCode: string; message: string }
  return { status: res.status, ...body }
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

describe('envd POST /files', () => {
  it('a multipart file goes to ?path=, intact', async () => {
    const data = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256))
    const res = await upload(streamOf([part('ignored.bin', data), END]), { path: '/home/user/a.bin' })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), [{ name: 'a.bin', type: 'file', path: '/home/user/a.bin' }])
    assert.equal(sha(agent.files.get('/home/user/a.bin') ?? Buffer.alloc(0)), sha(data))
  })

  it('several files: each part’s filename is its path, in order; other fields are skipped', async () => {
    const res = await upload(
      streamOf([part(null, 'a field', 'note'), part('/tmp/one.txt', 'one'), part('/tmp/two.txt', 'two'), END]),
    )
    assert.equal(res.status, 200)
    assert.deepEqual(
      ((await res.json()) as { path: string }[]).map((f) => f.path),
      ['/tmp/one.txt', '/tmp/two.txt'],
    )
    assert.equal(agent.files.get('/tmp/two.txt')?.toString(), 'two')
  })

  it('streams: the first file is being written while the rest of the body has not been sent', {
    timeout: 10_000,
  }, async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => {
      release = r
    })
    agent.onFirstBytes = () => release()
    const big = Buffer.alloc(200_000, 1)
    // the end of the body waits until the agent has bytes of the first file: a parser that
    // buffered the whole body first would wait forever (and the test time out)
    const res = await upload(streamOf([part('/tmp/first.bin', big), part('/tmp/second.bin', 'x'), END], [null, gate]))
    assert.equal(res.status, 200)
    assert.equal(agent.files.get('/tmp/first.bin')?.length, big.length)
  })

  it('an octet-stream body, gzip-encoded, arrives decoded; one that is not gzip is VALIDATION_FAILED', async () => {
    const text = Buffer.from('gzipped on the wire '.repeat(1000))
    const ok = await upload(streamOf([gzipSync(text)]), {
      path: '/tmp/z.txt',
      type: 'application/octet-stream',
      headers: { 'content-encoding': 'gzip' },
    })
    assert.equal(ok.status, 200)
    assert.equal(agent.files.get('/tmp/z.txt')?.toString(), text.toString())
    const bad = await errorOf(
      await upload(streamOf([Buffer.from('not gzip at all')]), {
        path: '/tmp/bad.txt',
        type: 'application/octet-stream',
        headers: { 'content-encoding': 'gzip' },
      }),
    )
    assert.equal(bad.status, 400)
    assert.equal(bad.code, 400)
    assert.equal(bad.errorCode, 'VALIDATION_FAILED')
    assert.ok(!agent.files.has('/tmp/bad.txt'))
  })

  it('malformed multipart is a 400 VALIDATION_FAILED in E2B’s shape, and no cut file is written', async () => {
    const cases: [string, BodyInit, string | undefined][] = [
      ['no boundary', streamOf([part('/tmp/a', 'x'), END]), 'multipart/form-data'],
      ['body cut short', streamOf([part('/tmp/cut.bin', 'partial data').subarray(0, 120)]), undefined],
      ['garbage header', streamOf([Buffer.from(`--${BOUNDARY}\r\n${'x'.repeat(100_000)}\r\n\r\n`)]), undefined],
      ['no file part', streamOf([part(null, 'just a field', 'note'), END]), undefined],
      ['a file part without a name and no path', streamOf([part('', 'data'), END]), undefined],
    ]
    for (const [what, body, type] of cases) {
      const err = await errorOf(await upload(body, { type }))
      assert.equal(err.status, 400, what)
      assert.equal(err.code, 400, what)
      assert.equal(err.errorCode, 'VALIDATION_FAILED', `${what}: ${err.message}`)
    }
    assert.deepEqual([...agent.files.keys()], [])
  })

  it('past the size limit: PAYLOAD_TOO_LARGE, with or without a Content-Length, and the write is abandoned', async () => {
    const big = Buffer.alloc(MAX_UPLOAD + 10, 2)
    const streamed = await errorOf(await upload(streamOf([part('/tmp/big.bin', big), END])))
    assert.equal(streamed.status, 413)
    assert.equal(streamed.errorCode, 'PAYLOAD_TOO_LARGE')
    assert.ok(!agent.files.has('/tmp/big.bin'))
    const octet = await errorOf(
      await upload(streamOf([big.subarray(0, 600_000), big.subarray(600_000)]), {
        path: '/tmp/big2.bin',
        type: 'application/octet-stream',
      }),
    )
    assert.equal(octet.errorCode, 'PAYLOAD_TOO_LARGE')
    assert.ok(!agent.files.has('/tmp/big2.bin'))
    // a gzip bomb: small on the wire, over the limit decoded
    const bomb = await errorOf(
      await upload(streamOf([gzipSync(Buffer.alloc(MAX_UPLOAD * 4))]), {
        path: '/tmp/bomb.bin',
        type: 'application/octet-stream',
        headers: { 'content-encoding': 'gzip' },
      }),
    )
    assert.equal(bomb.errorCode, 'PAYLOAD_TOO_LARGE')
    const declared = await errorOf(
      await cp.app.request('/files?path=/tmp/x', {
        method: 'POST',
        body: 'x',
        headers: {
          'E2b-Sandbox-Id': sandbox.sandboxID,
          'X-Access-Token': sandbox.envdAccessToken,
          'content-type': 'application/octet-stream',
          'content-length': String(MAX_UPLOAD + 1),
        },
      }),
    )
    assert.equal(declared.status, 413)
  })
})

describe('envd /files metadata', () => {
  it('X-Metadata-* headers go with the file, checked', async () => {
    const octet = 'application/octet-stream'
    const ok = await upload('data', {
      path: '/home/user/m.txt',
      type: octet,
      headers: { 'X-Metadata-Author': 'alice', 'X-Metadata-build': '42' },
    })
    assert.equal(ok.status, 200)
    // under app.request the header names come lower-cased (the Node server keeps their case)
    assert.deepEqual(agent.metadata.get('/home/user/m.txt'), { author: 'alice', build: '42' })
    const plain = await upload('data', { path: '/home/user/p.txt', type: octet })
    assert.equal(plain.status, 200)
    assert.equal(agent.metadata.get('/home/user/p.txt'), undefined)
    const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`X-Metadata-k${i}`, 'v']))
    const refused = await upload('data', { path: '/home/user/q.txt', type: octet, headers: tooMany })
    assert.equal(refused.status, 400)
    assert.equal((await errorOf(refused)).errorCode, 'VALIDATION_FAILED')
    assert.equal(agent.files.has('/home/user/q.txt'), false)
  })
})

describe("envd /files by an E2B client's signed URL", () => {
  /** What the E2B clients' downloadUrl/uploadUrl put in `signature` (their getSignature). */
  const sign = (path: string, operation: string, user: string, expiration?: number) =>
    `v1_${createHash('sha256')
      .update([path, operation, user, sandbox.envdAccessToken, ...(expiration ? [expiration] : [])].join(':'))
      .digest('base64')
      .replace(/=+$/, '')}`
  const signed = (method: string, query: Record<string, string>, body?: BodyInit, headers?: Record<string, string>) =>
    cp.app.request(`/files?${new URLSearchParams(query)}`, {
      method,
      body,
      headers: { 'E2b-Sandbox-Id': sandbox.sandboxID, ...headers },
    })

  it('writes the signed path with no token, and nothing else', async () => {
    const path = '/home/user/signed.txt'
    const ok = await signed('POST', { path, signature: sign(path, 'write', '') }, 'via url', {
      'content-type': 'application/octet-stream',
    })
    assert.equal(ok.status, 200)
    assert.equal(agent.files.get(path)?.toString(), 'via url')
    const exp = Math.floor(Date.now() / 1000) + 60
    const withUser = await signed(
      'POST',
      { path, username: 'user', signature: sign(path, 'write', 'user', exp), signature_expiration: String(exp) },
      'again',
      { 'content-type': 'application/octet-stream' },
    )
    assert.equal(withUser.status, 200)
    const refused = async (res: Response, status = 401) => {
      assert.equal(res.status, status)
      await res.body?.cancel()
    }
    const octet = { 'content-type': 'application/octet-stream' }
    // another path, the read signature, an expired or altered one, no sandbox named
    await refused(await signed('POST', { path: '/home/user/x', signature: sign(path, 'write', '') }, 'x', octet))
    await refused(await signed('POST', { path, signature: sign(path, 'read', '') }, 'x', octet))
    const past = Math.floor(Date.now() / 1000) - 1
    await refused(
      await signed(
        'POST',
        { path, signature: sign(path, 'write', '', past), signature_expiration: String(past) },
        'x',
        octet,
      ),
    )
    await refused(
      await signed(
        'POST',
        { path, signature: sign(path, 'write', '', exp), signature_expiration: String(exp + 1) },
        'x',
        octet,
      ),
    )
    await refused(
      await cp.app.request(`/files?${new URLSearchParams({ path, signature: sign(path, 'write', '') })}`, {
        method: 'POST',
        body: 'x',
      }),
    )
    // a multipart upload under a signed URL writes only its path
    const two = Buffer.concat([part(null, 'first'), part('/home/user/elsewhere.txt', 'second'), END])
    await refused(
      await signed('POST', { path, signature: sign(path, 'write', '') }, two, {
        'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
      }),
      403,
    )
    assert.equal(agent.files.has('/home/user/elsewhere.txt'), false)
  })

  it('a read signature reads (GET only)', async () => {
    const path = '/home/user/missing.txt'
    // the fake agent has no files: getting past the credential to the file is what is checked
    const res = await signed('GET', { path, signature: sign(path, 'read', '') })
    assert.equal((await errorOf(res)).errorCode, 'FILE_NOT_FOUND')
    const wrong = await signed('GET', { path, signature: sign(path, 'write', '') })
    assert.equal((await errorOf(wrong)).errorCode, 'UNAUTHENTICATED')
  })
})
