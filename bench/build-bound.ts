// A Dockerfile build's wall time with every step's writes on a bounded scratch disk (what users'
// builds get: the template's diskMB) against the same build with no bound (writes straight into
// the layer store, as before), alternating in one run. The step writes ~200 MB in ~2,000 files,
// so the copy out of the scratch disk shows. Not a test: it asserts nothing.
//   node --import tsx bench/build-bound.ts [--iterations N]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultAgentConfig, LocalAgent } from '@forkbox/agent'
import { N, printSummary, report } from './lib.ts'

const ROUNDS = Math.min(N, 5)
const templatesDir = process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir
const work = mkdtempSync(join(tmpdir(), 'forkbox-bench-bound-'))
const tag = `fbx-bench-bound-${process.pid}`
const agent = new LocalAgent(
  defaultAgentConfig({
    dataDir: join(work, 'data'),
    templatesDir,
    runscStateDir: `/run/${tag}`,
    cgroupParent: tag,
    poolSize: 0,
    networkSubnet: `10.${210 + (process.pid % 20)}.0.0/16`,
  }),
)
/** The bench's layers are this "key"'s: evicted at the end, nobody else's touched. */
const OWNER = `bench-${process.pid}`
const resources = { vcpus: 2, memoryMB: 2048, diskMB: 2048, pids: 2048 }
const dockerfile = (nonce: string) => `FROM forkbox:base
RUN echo ${nonce} && python3 -c "import os; os.makedirs('/data'); [open('/data/f%d' % i, 'wb').write(os.urandom(100000)) for i in range(2000)]"
RUN echo ${nonce} > /marker
`

async function once(bounded: boolean, i: number): Promise<number> {
  const nonce = `${process.pid}-${bounded ? 'b' : 'u'}-${i}-${Date.now()}`
  const t0 = performance.now()
  const built = await agent.buildDockerfile({
    dockerfile: dockerfile(nonce),
    resources,
    bounds: { owner: OWNER, ...(bounded ? { stepBytes: resources.diskMB * 1024 * 1024 } : {}) },
    timeoutMs: 600_000,
  })
  const ms = performance.now() - t0
  rmSync(built.rootfs, { recursive: true, force: true })
  return ms
}

try {
  await agent.reconcile()
  await agent.ensureTemplate('base')
  const bounded: number[] = []
  const unbounded: number[] = []
  await once(true, -1) // warm: the shim layer, the base template's external layer, page cache
  for (let i = 0; i < ROUNDS; i++) {
    unbounded.push(await once(false, i))
    bounded.push(await once(true, i))
  }
  report('build, 2 steps, 200 MB written: no bound (baseline)', unbounded)
  report('build, 2 steps, 200 MB written: scratch disk per step', bounded)
  printSummary()
} finally {
  await agent.pruneTemplates({ layersOnly: true, owner: { keyId: OWNER, maxBytes: 0 } })
  await agent.close()
  rmSync(work, { recursive: true, force: true })
}
