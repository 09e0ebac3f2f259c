// The API reference at /docs: Swagger UI (swagger-ui-dist, served from this server: no CDN, as a
// self-hosted server may have no internet) over /openapi.json. Public, as /openapi.json is: it
// describes the API and holds no secrets; "Authorize" takes a key for "Try it out". Its assets go
// out brotli- or gzip-encoded, made once per process (static-files.ts), under URLs that carry
// swagger-ui-dist's version, so that a browser keeps them until an upgrade; the document it reads
// is /openapi.json's, encoded once too (it is over a megabyte as generated).
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { AppError } from '@forkbox/protocol'
import type { App } from './env.ts'
import { loadStaticFile, type StaticFile, staticFileOf, staticResponse } from './static-files.ts'

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

const page = (version: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>forkbox API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png?v=${version}">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css?v=${version}">
</head>
<body>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js?v=${version}"></script>
<script>
SwaggerUIBundle({ url: '/docs/openapi.json', dom_id: '#reference', deepLinking: true, tryItOutEnabled: false })
</script>
</body>
</html>
`

export function registerDocs(app: App): void {
  const require = createRequire(import.meta.url)
  const manifest = require.resolve('swagger-ui-dist/package.json')
  const { version } = require(manifest) as { version: string }
  const dir = dirname(manifest)
  const html = page(version)
  app.get('/docs', (c) => {
    c.header('cache-control', 'no-cache')
    return c.html(html)
  })
  // the same document as /openapi.json, which the routes fix at start: generated and encoded once
  let spec: Promise<StaticFile> | undefined
  app.get('/docs/openapi.json', async (c) => {
    spec ??= Promise.resolve(app.request('/openapi.json')).then(async (res) => {
      if (!res.ok) throw new AppError('INTERNAL', `the OpenAPI document answered ${res.status}`)
      return staticFileOf(new Uint8Array(await res.arrayBuffer()), 'application/json')
    })
    const file = await spec.catch((err: unknown) => {
      spec = undefined
      throw err
    })
    return staticResponse(c, file, { cacheControl: 'no-cache', headers: { 'x-content-type-options': 'nosniff' } })
  })
  app.get('/docs/assets/:file', async (c) => {
    const file = c.req.param('file')
    const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined
    const asset = type ? await loadStaticFile(join(dir, file), type) : null
    if (!asset) throw new AppError('NOT_FOUND', `no such asset: ${file}`)
    // the page's URLs name the version; another (an old page's) is checked on each use
    const current = c.req.query('v') === version
    return staticResponse(c, asset, {
      cacheControl: current ? 'public, max-age=31536000, immutable' : 'no-cache',
      headers: { 'x-content-type-options': 'nosniff' },
    })
  })
}
