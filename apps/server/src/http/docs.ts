// The API reference at /docs: Swagger UI (swagger-ui-dist, served from this server: no CDN, as a
// self-hosted server may have no internet) over /openapi.json. Public, as /openapi.json is: it
// describes the API and holds no secrets; "Authorize" takes a key for "Try it out".
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { AppError } from '@forkbox/protocol'
import type { App } from './env.ts'

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>forkbox API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', deepLinking: true, tryItOutEnabled: false })
</script>
</body>
</html>
`

export function registerDocs(app: App): void {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const cache = new Map<string, Promise<Buffer>>()
  app.get('/docs', (c) => c.html(PAGE))
  app.get('/docs/assets/:file', async (c) => {
    const file = c.req.param('file')
    const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined
    if (!type) throw new AppError('NOT_FOUND', `no such asset: ${file}`)
    let body = cache.get(file)
    if (!body) {
      body = readFile(join(dir, file))
      cache.set(file, body)
    }
    return c.body(new Uint8Array(await body), 200, {
      'content-type': type,
      'cache-control': 'public, max-age=86400',
    })
  })
}
