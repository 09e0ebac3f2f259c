// Builds and bakes the templates the e2e tests use (once; cached by content hash), showing progress.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultAgentConfig, LocalAgent } from '@forkbox/agent'
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
let last = ''
for (const t of await agent.templates()) {
  await agent.ensureTemplate(t.name, (p) => {
    // a Dockerfile's steps say what they are; other phases how far they got
    const how = p.message && p.fraction === undefined ? p.message : `${Math.round((p.fraction ?? 0) * 100)}%`
    const line = `${p.template}: ${p.phase} ${how}`
    if (line !== last) console.log(line)
    last = line
  })
}
await agent.close()
for (const dir of [dataDir, runscStateDir]) rmSync(dir, { recursive: true, force: true })
console.log(
  'templates ready:',
  (await agent.templates()).map((t) => `${t.name}${t.ready ? '' : ' (missing)'}`).join(', '),
)
