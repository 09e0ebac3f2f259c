#!/usr/bin/env node
// In the repository: registers tsx's loader (with the repo's tsconfig, which maps @forkbox/sdk to
// its source) and runs the TypeScript CLI. Installed from its package: runs the build.
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const source = new URL('../src/main.ts', import.meta.url)
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api')
  register({ tsconfig: fileURLToPath(new URL('../../../tsconfig.json', import.meta.url)) })
  await import(source.href)
} else {
  await import('../dist/main.js')
}
