// A snapshot's image pulled from a peer over HTTP is kept only if its bytes hash to the control
// plane's record of it (the hash its holder took when it made it): a peer that sends other bytes
// with their own, matching, trailer is refused and nothing is kept; the record is what counts, not
// the trailer; an image older than records falls back to the sender's hash.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fetchImage, imageSignature, serveImage } from '../src/remote/images.ts'
import { digestOf, expectedDigest, exportImage, importImage } from '../src/sandboxes/image-transfer.ts'

const CREDENTIAL = 'host-credential-for-tests'
let dir: string
let server: Server
let base: string
/** The hash the holder reported when it made `snap-1` (what the control plane keeps). */
let record: string

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-image-transfer-'))
  mkdirSync(join(dir, 'held'))
  mkdirSync(join(dir, 'held', 'snap-1'))
  writeFileSync(join(dir, 'held', 'snap-1', 'checkpoint.img'), randomBytes(2 * 1024 * 1024 + 3))
  writeFileSync(join(dir, 'held', 'snap-1', 'pages.img'), randomBytes(1000))
  record = await digestOf(exportImage(join(dir, 'held', 'snap-1')))
  // `lying`: the true bytes, with a trailer that names other ones
  server = createServer((req, res) => {
    if (req.url?.startsWith('/lying/')) {
      const image = exportImage(join(dir, 'held', 'snap-1'))
      res.writeHead(200, { trailer: 'x-forkbox-sha256' })
      ;(async () => {
        for await (const c of image.stream as unknown as AsyncIterable<Uint8Array>) res.write(c)
        res.addTrailers({ 'x-forkbox-sha256': 'f'.repeat(64) })
        res.end()
      })().catch(() => res.destroy())
      return
    }
    const served = serveImage(req, res, {
      credential: () => CREDENTIAL,
      exportImage: async (id, skip) => exportImage(join(dir, 'held', id), skip),
    })
    if (!served) res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})

after(async () => {
  await new Promise((r) => server.close(r))
  rmSync(dir, { recursive: true, force: true })
})

function imageUrl(id: string): string {
  const expires = Date.now() + 60_000
  return `${base}/v1/agent/images/${id}?expires=${expires}&sig=${imageSignature(CREDENTIAL, id, expires)}`
}

async function pull(url: string, into: string, recorded: string | null): Promise<number> {
  const { body, sha256 } = await fetchImage(url)
  return importImage(into, body, expectedDigest(recorded, sha256))
}

describe("snapshot images between hosts, checked against the control plane's record", () => {
  it('the record is the hash of the very stream a peer sends: a pull checked against it is kept whole', async () => {
    const into = join(dir, 'copy')
    assert.ok((await pull(imageUrl('snap-1'), into, record)) > 2 * 1024 * 1024)
    for (const f of ['checkpoint.img', 'pages.img'])
      assert.deepEqual(readFileSync(join(into, f)), readFileSync(join(dir, 'held', 'snap-1', f)))
  })

  it('a sender with other bytes than the record is refused, though its own trailer matches them; nothing is kept', async () => {
    // the holder's image changed after it was made and recorded (a compromised agent)
    cpSync(join(dir, 'held', 'snap-1'), join(dir, 'held', 'snap-evil'), { recursive: true })
    writeFileSync(join(dir, 'held', 'snap-evil', 'pages.img'), randomBytes(1000))
    const into = join(dir, 'evil-copy')
    await assert.rejects(pull(imageUrl('snap-evil'), into, record), (err: Error & { code?: string }) => {
      assert.match(
        err.message,
        /^image transfer refused: its bytes hash to sha256 [0-9a-f]{64}, but the control plane recorded/,
      )
      assert.ok(err.message.includes(record))
      return true
    })
    assert.equal(existsSync(into), false)
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.startsWith('evil-copy')),
      [],
    )
    // checked against the sender alone, the same pull would have been taken: the record refuses it
    await pull(imageUrl('snap-evil'), join(dir, 'evil-unchecked'), null)
    assert.ok(existsSync(join(dir, 'evil-unchecked', 'pages.img')))
  })

  it('the record wins over the trailer: the true bytes with a false trailer are kept', async () => {
    const into = join(dir, 'lying-copy')
    await pull(`${base}/lying/snap-1?x=1`, into, record)
    assert.deepEqual(readFileSync(join(into, 'pages.img')), readFileSync(join(dir, 'held', 'snap-1', 'pages.img')))
    // with no record, the false trailer is what it is checked against, and refused
    await assert.rejects(pull(`${base}/lying/snap-1?x=2`, join(dir, 'lying-unrecorded'), null), /its sender says f{64}/)
    assert.equal(existsSync(join(dir, 'lying-unrecorded')), false)
  })
})
