// Images from agent to agent over HTTP: the signature the control plane makes is the one the
// holding agent checks; bad, forged or expired ones are refused; the bytes arrive hash-checked.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { imageSignature as agentSignature, sendSlots, serveImage } from '@forkbox/agent'
import { fetchImage } from '../../agent/src/remote/images.ts'
import { expectedDigest, exportImage, importImage } from '../../agent/src/sandboxes/image-transfer.ts'
import { cutFirstResponse } from '../../agent/test/cut-response.ts'
import { imageSignature as fleetSignature } from '../../server/src/fleet/fleet.ts'

const CREDENTIAL = 'host-credential-for-tests'
let dir: string
let server: Server
let base: string
const requests: string[] = []
/** Images being sent now, and the most at once. */
const sending = { now: 0, most: 0 }
const slots = sendSlots(2)

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-images-'))
  mkdirSync(join(dir, 'snap-1'))
  writeFileSync(join(dir, 'snap-1', 'checkpoint.img'), randomBytes(3 * 1024 * 1024 + 17))
  writeFileSync(join(dir, 'snap-1', 'pages.img'), randomBytes(1000))
  server = createServer((req, res) => {
    cutFirstResponse(req, res)
    requests.push(req.url ?? '')
    if (
      !serveImage(req, res, {
        credential: () => CREDENTIAL,
        exportImage: async (id, skip) => {
          const image = exportImage(join(dir, id), skip)
          sending.now++
          sending.most = Math.max(sending.most, sending.now)
          const done = new TransformStream<Uint8Array, Uint8Array>({
            flush() {
              sending.now--
            },
          })
          return { ...image, stream: image.stream.pipeThrough(done) }
        },
        slots,
      })
    )
      res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})

after(async () => {
  await new Promise((r) => server.close(r))
  rmSync(dir, { recursive: true, force: true })
})

const urlFor = (id: string, expires: number, sig: string) =>
  `${base}/v1/agent/images/${id}?expires=${expires}&sig=${sig}`

describe('images between agents', () => {
  it('the control plane signs what the agent checks', () => {
    const e = Date.now() + 1000
    assert.equal(fleetSignature(CREDENTIAL, 'snap-1', e), agentSignature(CREDENTIAL, 'snap-1', e))
  })

  it('a signed pull copies the image whole, hash-checked', async () => {
    const expires = Date.now() + 60_000
    const { body, sha256 } = await fetchImage(urlFor('snap-1', expires, agentSignature(CREDENTIAL, 'snap-1', expires)))
    await importImage(join(dir, 'copy'), body, expectedDigest(null, sha256))
    for (const f of ['checkpoint.img', 'pages.img'])
      assert.deepEqual(readFileSync(join(dir, 'copy', f)), readFileSync(join(dir, 'snap-1', f)))
  })

  it('a pull cut midway resumes from the byte it reached; the copy is whole', async () => {
    const expires = Date.now() + 60_000
    requests.length = 0
    const url = `${urlFor('snap-1', expires, agentSignature(CREDENTIAL, 'snap-1', expires))}&cut=${1536 * 1024}`
    const { body, sha256 } = await fetchImage(url)
    await importImage(join(dir, 'resumed'), body, expectedDigest(null, sha256))
    for (const f of ['checkpoint.img', 'pages.img'])
      assert.deepEqual(readFileSync(join(dir, 'resumed', f)), readFileSync(join(dir, 'snap-1', f)))
    assert.equal(requests.length, 2, JSON.stringify(requests))
    const offset = Number(new URL(requests[1] ?? '', 'http://x').searchParams.get('offset'))
    assert.ok(offset > 0 && offset <= 1536 * 1024, `resumed at ${offset}`)
  })

  it('a host sends at most its slots of images at once; the other pullers wait their turn, none fails', async () => {
    const expires = Date.now() + 60_000
    sending.now = 0
    sending.most = 0
    const url = urlFor('snap-1', expires, agentSignature(CREDENTIAL, 'snap-1', expires))
    await Promise.all(
      [0, 1, 2, 3, 4].map(async (i) => {
        const { body, sha256 } = await fetchImage(url)
        await importImage(join(dir, `many-${i}`), body, expectedDigest(null, sha256))
      }),
    )
    for (let i = 0; i < 5; i++)
      assert.deepEqual(
        readFileSync(join(dir, `many-${i}`, 'pages.img')),
        readFileSync(join(dir, 'snap-1', 'pages.img')),
      )
    assert.equal(sending.most, 2)
  })

  it('an image exported twice is the same bytes (what resuming relies on)', async () => {
    const read = async (skip: number) => {
      const image = exportImage(join(dir, 'snap-1'), skip)
      const chunks: Uint8Array[] = []
      for await (const c of image.stream as unknown as AsyncIterable<Uint8Array>) chunks.push(c)
      return { bytes: Buffer.concat(chunks), sha: await image.sha256 }
    }
    const whole = await read(0)
    const tail = await read(12345)
    assert.deepEqual(tail.bytes, whole.bytes.subarray(12345))
    assert.equal(tail.sha, whole.sha)
  })

  it('refuses a forged, an expired, a far-future or another image signature', async () => {
    const soon = Date.now() + 60_000
    const cases = [
      urlFor('snap-1', soon, agentSignature('another-credential', 'snap-1', soon)),
      urlFor('snap-1', Date.now() - 1, agentSignature(CREDENTIAL, 'snap-1', Date.now() - 1)),
      urlFor('snap-1', Date.now() + 3600_000, agentSignature(CREDENTIAL, 'snap-1', Date.now() + 3600_000)),
      urlFor('snap-1', soon, agentSignature(CREDENTIAL, 'snap-2', soon)),
      `${base}/v1/agent/images/snap-1`,
    ]
    for (const u of cases) await assert.rejects(fetchImage(u), { code: 'HOST_UNREACHABLE' })
    const missing = Date.now() + 60_000
    await assert.rejects(fetchImage(urlFor('nope', missing, agentSignature(CREDENTIAL, 'nope', missing))), {
      code: 'SNAPSHOT_NOT_FOUND',
    })
  })

  it('a transfer whose bytes do not match their hash leaves nothing', async () => {
    async function* bytes() {
      yield new Uint8Array([1, 2, 3])
    }
    await assert.rejects(importImage(join(dir, 'bad'), bytes(), expectedDigest('0'.repeat(64), Promise.resolve('x'))))
    assert.throws(() => readFileSync(join(dir, 'bad', 'x')))
  })
})
