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

/** Prints the gzipped size of what a first load fetches, and fails the build past the budget. */
function sizeBudget(): Plugin {
  return {
    name: 'forkbox-size-budget',
    async generateBundle(_options, bundle) {
      const { gzipSync } = await import('node:zlib')
      let total = 0
      for (const file of Object.values(bundle)) {
        const body = file.type === 'chunk' ? file.code : file.source
        total += gzipSync(typeof body === 'string' ? Buffer.from(body) : Buffer.from(body)).length
      }
      const kb = Math.round(total / 1024)
      console.log(`dashboard bundle: ${kb} KiB gzipped, budget ${BUDGET_KB} KiB`)
      if (kb > BUDGET_KB) this.error(`the dashboard is ${kb} KiB gzipped, over its ${BUDGET_KB} KiB budget`)
    },
  }
}

export default defineConfig({
  plugins: [sdkFromSource(), preact(), sizeBudget()],
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 1024 },
})
