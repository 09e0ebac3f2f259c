// Builds and bakes the templates the e2e tests use (once; cached by content hash), showing progress.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultAgentConfig, LocalAgent } from '@forkbox/agent'
import type { TemplateProgress } from '@forkbox/protocol'
import { sharedTemplatesDir, testSubnet } from './harness.ts'

const dataDir = mkdtempSync(join(tmpdir(), 'forkbox-e2e-prepare-'))
const runscStateDir = `/run/forkbox-e2e-prepare-${process.pid}`
const agent = new LocalAgent(
  defaultAgentConfig({
    dataDir,
    templatesDir: sharedTemplatesDir,
    runscStateDir,
    cgroupParent: `forkbox-e2e-prepare-${process.pid}`,
    poolSize: 0,
    // not `forkbox up`'s block: the tests may run while it does
    networkSubnet: testSubnet(31),
  }),
)
const last = new Map<string, string>()
const show = (p: TemplateProgress) => {
  // a Dockerfile's steps say what they are; other phases how far they got
  const how = p.message && p.fraction === undefined ? p.message : `${Math.round((p.fraction ?? 0) * 100)}%`
  const line = `${p.template}: ${p.phase} ${how}`
  if (line !== last.get(p.template)) console.log(line)
  last.set(p.template, line)
}
// `base` first (the Dockerfiles' FROM); then the rest at once, overlapping their downloads
await agent.ensureTemplate('base', show)
await Promise.all((await agent.templates()).map((t) => agent.ensureTemplate(t.name, show)))
await agent.close()
for (const dir of [dataDir, runscStateDir]) rmSync(dir, { recursive: true, force: true })
console.log(
  'templates ready:',
  (await agent.templates()).map((t) => `${t.name}${t.ready ? '' : ' (missing)'}`).join(', '),
)
