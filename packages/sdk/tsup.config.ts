// The published build of @forkbox/sdk (`npm run build -w packages/sdk`, run by `prepack`): ESM and
// CommonJS with types, once for Node (also Deno and Bun) and once for browsers and edge runtimes,
// where the platform module (src/platform/index.ts) is web.ts instead of node.ts, so that bundle
// imports no `node:` module and no `ws`. @forkbox/protocol is not published: what the SDK uses of
// it is bundled (its types import zod's, hence the zod dependency).
import { fileURLToPath } from 'node:url'
import { defineConfig, type Options } from 'tsup'

const platformWeb = fileURLToPath(new URL('./src/platform/web.ts', import.meta.url))

const shared: Options = {
  entry: { index: 'src/index.ts' },
  format: ['esm', 'cjs'],
  target: 'es2022',
  tsconfig: 'tsconfig.build.json',
  noExternal: ['@forkbox/protocol'],
  splitting: false,
}

export default defineConfig([
  { ...shared, platform: 'node', outDir: 'dist', clean: true, dts: true },
  {
    ...shared,
    platform: 'browser',
    outDir: 'dist/web',
    esbuildPlugins: [
      {
        name: 'forkbox-web-platform',
        setup(build) {
          build.onResolve({ filter: /\/platform\/index\.ts$/ }, () => ({ path: platformWeb }))
        },
      },
    ],
  },
])
