// The published build of @forkbox/cli (`prepack`): one ESM file for the client commands, with the
// SDK and the MCP server bundled from their source (neither is a dependency anyone installs).
// `forkbox up` / `server` / `agent` load @forkbox/host at run time, which only a checkout has.
import { defineConfig } from 'tsup'

export default defineConfig({
  entry: { main: 'src/main.ts' },
  format: ['esm'],
  platform: 'node',
  target: 'node20',
  tsconfig: '../../tsconfig.json',
  noExternal: ['@forkbox/sdk', '@forkbox/mcp', '@forkbox/protocol'],
  splitting: false,
  clean: true,
})
