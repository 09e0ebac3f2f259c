// The web dashboard (apps/dashboard, built by scripts/install.sh) at `/`: its page and its hashed
// assets, no key needed to load them (the page signs in with a key, then calls the API through the
// SDK like any client). Its pages are hash routes, so `/` and `/assets/*` are all it takes. The
// build writes each file's brotli and gzip forms beside it (apps/dashboard/vite.config.ts).
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { AppError } from '@forkbox/protocol'
import type { App } from './env.ts'
import { loadStaticFile, staticResponse } from './static-files.ts'

const DIST = fileURLToPath(new URL('../../../dashboard/dist/', import.meta.url))

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
}

// the page runs only its own code; images may be data: URLs (plots); xterm.js styles inline
const CSP = [
  "default-src 'self'",
  "img-src 'self' data:",
  "style-src 'self' 'unsafe-inline'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ')

const NOT_BUILT = `<!doctype html><html lang="en"><title>forkbox</title>
<p>The dashboard is not built: run <code>npm run build -w apps/dashboard</code> in the forkbox checkout
(<code>npm run up</code> does it). The API is at <a href="/docs">/docs</a>.</p></html>`

export function registerDashboard(app: App): void {
  app.get('/', async (c) => {
    const page = await loadStaticFile(`${DIST}index.html`, 'text/html; charset=utf-8')
    const headers = { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff' }
    if (page === null) {
      c.header('cache-control', 'no-cache')
      for (const [name, value] of Object.entries(headers)) c.header(name, value)
      return c.html(NOT_BUILT, 503)
    }
    // it names the current build's assets: asked again on every load (a 304 while unchanged)
    return staticResponse(c, page, { cacheControl: 'no-cache', headers })
  })
  app.get('/assets/:file', async (c) => {
    const file = c.req.param('file')
    const type = TYPES[extname(file)]
    if (!/^[\w.-]+$/.test(file) || !type) throw new AppError('NOT_FOUND', `no such asset: ${file}`)
    const asset = await loadStaticFile(`${DIST}assets/${file}`, type)
    if (asset === null) throw new AppError('NOT_FOUND', `no such asset: ${file}`)
    // the names carry a hash of their content
    return staticResponse(c, asset, {
      cacheControl: 'public, max-age=31536000, immutable',
      headers: { 'x-content-type-options': 'nosniff' },
    })
  })
}
