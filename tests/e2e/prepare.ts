// Builds and bakes the templates the e2e tests use (once; cached by content hash), showing progress.
import { defaultAgentConfig, LocalAgent } from '@forkbox/agent'

const agent = new LocalAgent(
  defaultAgentConfig({
    dataDir: process.env.FORKBOX_TEST_DATA_DIR ?? '/tmp/forkbox-e2e-prepare',
    templatesDir: process.env.FORKBOX_TEMPLATES_DIR ?? '/var/lib/forkbox/templates',
    runscStateDir: '/run/forkbox-e2e-prepare',
    cgroupParent: 'forkbox-e2e-prepare',
  }),
)
let last = ''
for (const t of agent.templates()) {
  await agent.ensureTemplate(t.name, (p) => {
    const line = `${p.template}: ${p.phase} ${Math.round((p.fraction ?? 0) * 100)}%`
    if (line !== last) console.log(line)
    last = line
  })
}
await agent.close()
console.log(
  'templates ready:',
  agent
    .templates()
    .map((t) => `${t.name}${t.ready ? '' : ' (missing)'}`)
    .join(', '),
)
