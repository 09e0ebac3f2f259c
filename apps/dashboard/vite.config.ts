// The dashboard's build (`npm run build -w apps/dashboard`, run by scripts/install.sh): a static
// single-page app the control plane serves at `/`. It reaches the platform only through
// @forkbox/sdk, taken from its source with the browser platform module (as the SDK's own web
// build does), so the dashboard always runs the SDK of this checkout.
import { fileURLToPath } from 'node:url'
import preact from '@preact/preset-vite'
import { defineConfig, type Plugin } from 'vite'

const sdk = fileURLToPath(new URL('../../packages/sdk/src/', import.meta.url))
const BUDGET_KB = 250

function sdkFromSource(): Plugin {
  return {
    name: 'forkbox-sdk-web',
    enforce: 'pre',
    resolveId(source, importer) {
      if (source === '@forkbox/sdk') return `${sdk}index.ts`
      if (importer?.startsWith(sdk) && source.endsWith('platform/index.ts')) return `${sdk}platform/web.ts`
      return null
    },
  }
}

/**
 * Writes each built file's brotli and gzip forms beside it (`NAME.br`, `NAME.gz`: the server
 * sends the one the browser accepts, so nothing is compressed per request), prints what a first
 * load moves, and fails the build past the budget (gzip's size: every browser accepts it).
 */
function precompressed(): Plugin {
  return {
    name: 'forkbox-precompress',
    async writeBundle(options, bundle) {
      const { brotliCompress, constants, gzip } = await import('node:zlib')
      const { promisify } = await import('node:util')
      const { writeFile } = await import('node:fs/promises')
      const { join } = await import('node:path')
      const [br, gz] = [promisify(brotliCompress), promisify(gzip)]
      const outDir = options.dir ?? fileURLToPath(new URL('dist/', import.meta.url))
      const totals = { identity: 0, br: 0, gzip: 0 }
      await Promise.all(
        Object.values(bundle).map(async (file) => {
          const code = file.type === 'chunk' ? file.code : file.source
          const body = typeof code === 'string' ? Buffer.from(code) : Buffer.from(code)
          totals.identity += body.length
          // the server sends small files and already-compressed formats as they are
          if (body.length < 1024 || !/\.(js|css|html|svg|json)$/.test(file.fileName)) {
            totals.br += body.length
            totals.gzip += body.length
            return
          }
          const path = join(outDir, file.fileName)
          const [brotli, gzipped] = await Promise.all([
            br(body, {
              params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
            }),
            gz(body, { level: 9 }),
          ])
          await Promise.all([writeFile(`${path}.br`, brotli), writeFile(`${path}.gz`, gzipped)])
          totals.br += brotli.length
          totals.gzip += gzipped.length
        }),
      )
      const kib = (n: number) => Math.round(n / 1024)
      console.log(
        `dashboard first load: ${kib(totals.br)} KiB brotli, ${kib(totals.gzip)} KiB gzip (${kib(totals.identity)} KiB as built), budget ${BUDGET_KB} KiB gzipped`,
      )
      if (kib(totals.gzip) > BUDGET_KB)
        this.error(`the dashboard is ${kib(totals.gzip)} KiB gzipped, over its ${BUDGET_KB} KiB budget`)
    },
  }
}

export default defineConfig({
  plugins: [sdkFromSource(), preact(), precompressed()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 1024,
    // the plugin above prints the sizes that are served
    reportCompressedSize: false,
    // the precompression's second (brotli at its best quality, once per build) is meant
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
})
