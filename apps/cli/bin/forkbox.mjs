#!/usr/bin/env node
// Runs the TypeScript CLI directly: registers tsx's loader, then loads the entry point.
import { register } from 'tsx/esm/api'

register()
await import('../src/main.ts')
