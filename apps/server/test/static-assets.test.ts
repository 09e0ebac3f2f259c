// The dashboard's and the API reference's static files: the encoding the request accepts (brotli,
// then gzip, else as stored), bodies that decompress to the file, caching by name, ETags and 304s,
// and encodings made once (by the build, or once per process) rather than per request.
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { brotliCompressSync, brotliDecompressSync, constants, gunzipSync } from 'node:zlib'
import { chooseEncoding, loadStaticFile } from '../src/http/static-files.ts'
import { cp, useControlPlane } from './app-harness.ts'

const require = createRequire(import.meta.url)
const swagger = dirname(require.resolve('swagger-ui-dist/package.json'))
const { version } = require('swagger-ui-dist/package.json') as { version: string }
const dist = fileURLToPath(new URL('../../dashboard/dist/', import.meta.url))

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await cp.app.request(path, { headers })
  return { res, body: new Uint8Array(await res.arrayBuffer()) }
}

function decoded(encoding: string | null, body: Uint8Array): Buffer {
  if (encoding === 'br') return brotliDecompressSync(body)
  if (encoding === 'gzip') return gunzipSync(body)
  return Buffer.from(body)
}

describe('chooseEncoding', () => {
  const cases: [string | undefined, string][] = [
    ['gzip, deflate, br, zstd', 'br'],
    ['gzip, deflate', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['br;q=0.5, gzip;q=0.5', 'br'],
    ['BR', 'br'],
    ['*', 'br'],
    ['*;q=0', 'identity'],
    ['*, br;q=0', 'gzip'],
    ['deflate, identity', 'identity'],
    ['', 'identity'],
    [undefined, 'identity'],
  ]
  for (const [header, expected] of cases)
    it(`${JSON.stringify(header)} → ${expected}`, () => assert.equal(chooseEncoding(header), expected))
  it('only what the file has', () => {
    assert.equal(chooseEncoding('br, gzip', ['gzip']), 'gzip')
    assert.equal(chooseEncoding('br', ['gzip']), 'identity')
    assert.equal(chooseEncoding('br, gzip', []), 'identity')
  })
})

describe('the API reference (/docs)', () => {
  useControlPlane()
  const bundle = readFileSync(join(swagger, 'swagger-ui-bundle.js'))
  const url = `/docs/assets/swagger-ui-bundle.js?v=${version}`

  it("names its assets by swagger-ui-dist's version, and is asked for again on each load", async () => {
    const { res, body } = await get('/docs')
    assert.equal(res.headers.get('cache-control'), 'no-cache')
    const page = Buffer.from(body).toString()
    for (const file of ['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png'])
      assert.ok(page.includes(`/docs/assets/${file}?v=${version}`), file)
  })

  it('sends the bundle brotli, gzip or as it is, as the request accepts, each decompressing to the file', async () => {
    const sizes: Record<string, number> = {}
    for (const [accept, encoding] of [
      ['gzip, deflate, br', 'br'],
      ['gzip', 'gzip'],
      ['identity', null],
      ['', null],
    ] as const) {
      const { res, body } = await get(url, accept ? { 'accept-encoding': accept } : {})
      assert.equal(res.status, 200)
      assert.equal(res.headers.get('content-encoding'), encoding, accept)
      assert.equal(res.headers.get('content-type'), 'text/javascript; charset=utf-8')
      assert.equal(res.headers.get('content-length'), String(body.length))
      assert.equal(res.headers.get('vary'), 'Accept-Encoding')
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable')
      assert.ok(decoded(encoding, body).equals(bundle), `${accept}: the bytes decompress to the file`)
      sizes[encoding ?? 'identity'] = body.length
    }
    // 1.7 MB as it is; about a fifth of that encoded
    assert.ok((sizes.br ?? 0) < (sizes.gzip ?? 0) && (sizes.gzip ?? 0) < bundle.length / 3, JSON.stringify(sizes))
  })

  it('answers 304 to a matching If-None-Match, with a tag per encoding', async () => {
    const br = (await get(url, { 'accept-encoding': 'br' })).res.headers.get('etag') ?? ''
    const gz = (await get(url, { 'accept-encoding': 'gzip' })).res.headers.get('etag') ?? ''
    const plain = (await get(url)).res.headers.get('etag') ?? ''
    assert.match(br, /^"[\w-]+-br"$/)
    assert.equal(new Set([br, gz, plain]).size, 3, 'each encoding its own tag')
    const hit = await get(url, { 'accept-encoding': 'br', 'if-none-match': `"other", W/${br}` })
    assert.equal(hit.res.status, 304)
    assert.equal(hit.body.length, 0)
    assert.equal(hit.res.headers.get('etag'), br)
    assert.equal(hit.res.headers.get('vary'), 'Accept-Encoding')
    // the gzip body's tag does not match the brotli body
    assert.equal((await get(url, { 'accept-encoding': 'br', 'if-none-match': gz })).res.status, 200)
  })

  it("reads /openapi.json's document, encoded once, revalidated by its tag", async () => {
    assert.ok(
      Buffer.from((await get('/docs')).body)
        .toString()
        .includes("url: '/docs/openapi.json'"),
    )
    const doc = Buffer.from((await get('/openapi.json')).body)
    const { res, body } = await get('/docs/openapi.json', { 'accept-encoding': 'gzip, deflate, br' })
    assert.equal(res.headers.get('content-encoding'), 'br')
    assert.equal(res.headers.get('content-type'), 'application/json')
    assert.equal(res.headers.get('cache-control'), 'no-cache')
    assert.ok(brotliDecompressSync(body).equals(doc), 'the same document')
    assert.ok(body.length < doc.length / 10, `${body.length} of ${doc.length} bytes`)
    const gz = await get('/docs/openapi.json', { 'accept-encoding': 'gzip' })
    assert.ok(gunzipSync(gz.body).equals(doc))
    const etag = res.headers.get('etag') ?? ''
    assert.equal((await get('/docs/openapi.json', { 'accept-encoding': 'br', 'if-none-match': etag })).res.status, 304)
  })

  it('keeps an old version’s URL, or none, revalidating; sends a PNG as it is; refuses other files', async () => {
    assert.equal((await get('/docs/assets/swagger-ui.css?v=0.0.1')).res.headers.get('cache-control'), 'no-cache')
    assert.equal((await get('/docs/assets/swagger-ui.css')).res.headers.get('cache-control'), 'no-cache')
    const png = await get('/docs/assets/favicon-32x32.png', { 'accept-encoding': 'br, gzip' })
    assert.equal(png.res.headers.get('content-encoding'), null)
    assert.equal(png.res.headers.get('vary'), null)
    assert.ok(Buffer.from(png.body).equals(readFileSync(join(swagger, 'favicon-32x32.png'))))
    for (const path of ['/docs/assets/package.json', '/docs/assets/swagger-ui-bundle.js.map'])
      assert.equal((await get(path)).res.status, 404, path)
  })
})

describe('loadStaticFile', () => {
  it("uses the build's encodings when as new as the file, makes them once otherwise, and reloads a changed file", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fbx-static-'))
    try {
      const path = join(dir, 'app.js')
      const text = Buffer.from('export const greeting = "hello";\n'.repeat(200))
      writeFileSync(path, text)
      // quality 1: not what the server would make, so its bytes show which one is sent
      const built = brotliCompressSync(text, { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } })
      writeFileSync(`${path}.br`, built)
      const file = await loadStaticFile(path, 'text/javascript')
      assert.ok(file?.bodies.br && Buffer.from(file.bodies.br).equals(built), "the build's .br")
      assert.ok(file?.bodies.gzip && gunzipSync(file.bodies.gzip).equals(text), 'no .gz built: made here')
      assert.equal(await loadStaticFile(path, 'text/javascript'), file, 'loaded once')

      // the file changes (a rebuild in place) and its .br is now older than it: both ignored, made again
      const next = Buffer.from('export const greeting = "bonjour";\n'.repeat(200))
      writeFileSync(path, next)
      const past = new Date(Date.now() - 60_000)
      utimesSync(`${path}.br`, past, past)
      const reloaded = await loadStaticFile(path, 'text/javascript')
      assert.notEqual(reloaded?.etag, file?.etag)
      assert.ok(
        reloaded?.bodies.br && brotliDecompressSync(reloaded.bodies.br).equals(next),
        'the stale .br is not sent',
      )
      assert.equal(await loadStaticFile(join(dir, 'missing.js'), 'text/javascript'), null)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

// the dashboard's own build (scripts/install.sh runs it); a checkout that has not built it skips these
const built = existsSync(join(dist, 'index.html'))
describe('the dashboard (/)', {
  skip: built ? false : 'the dashboard is not built: npm run build -w apps/dashboard',
}, () => {
  useControlPlane()

  it('sends index.html no-cache with its CSP and a tag to revalidate against', async () => {
    const { res, body } = await get('/', { 'accept-encoding': 'gzip, deflate, br' })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('cache-control'), 'no-cache')
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/)
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/)
    const page = decoded(res.headers.get('content-encoding'), body)
    assert.ok(page.equals(readFileSync(join(dist, 'index.html'))))
    const etag = res.headers.get('etag') ?? ''
    const again = await get('/', { 'accept-encoding': 'gzip, deflate, br', 'if-none-match': etag })
    assert.equal(again.res.status, 304)
    assert.match(again.res.headers.get('content-security-policy') ?? '', /default-src 'self'/)
  })

  it('sends its hashed assets as the build compressed them, cached for a year', async () => {
    const page = readFileSync(join(dist, 'index.html'), 'utf8')
    const assets = [...page.matchAll(/\/assets\/([\w.-]+\.(?:js|css))/g)].map((m) => m[1] as string)
    assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), page)
    for (const asset of assets) {
      const identity = readFileSync(join(dist, 'assets', asset))
      for (const [accept, encoding, suffix] of [
        ['gzip, deflate, br', 'br', '.br'],
        ['gzip', 'gzip', '.gz'],
        ['', null, ''],
      ] as const) {
        const { res, body } = await get(`/assets/${asset}`, { 'accept-encoding': accept })
        assert.equal(res.status, 200)
        assert.equal(res.headers.get('content-encoding'), encoding, `${asset} ${accept}`)
        assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable')
        assert.equal(res.headers.get('vary'), 'Accept-Encoding')
        assert.equal(res.headers.get('content-length'), String(body.length))
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
        assert.ok(Buffer.from(body).equals(readFileSync(join(dist, 'assets', `${asset}${suffix}`))), 'the built file')
        assert.ok(decoded(encoding, body).equals(identity), 'decompresses to the asset')
      }
    }
    assert.equal(
      (await get(`/assets/${assets[0]}.br`)).res.status,
      404,
      'the encoded copies are not files of their own',
    )
  })
})
