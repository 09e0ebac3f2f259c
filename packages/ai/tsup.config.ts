// The published build of @forkbox/ai (`prepack`): ESM and CommonJS with types, one entry per
// framework so an app loads only its own; the SDK and the frameworks stay the app's.
import { defineConfig } from 'tsup'

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    vercel: 'src/vercel.ts',
    'openai-agents': 'src/openai-agents.ts',
    langchain: 'src/langchain.ts',
  },
  format: ['esm', 'cjs'],
  target: 'es2022',
  platform: 'neutral',
  tsconfig: 'tsconfig.build.json',
  external: ['@forkbox/sdk', 'ai', '@openai/agents', '@langchain/core', 'zod'],
  dts: true,
  splitting: false,
  clean: true,
})
