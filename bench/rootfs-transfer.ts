// A user-built template's rootfs from one agent to another, as a fleet host without it pulls it:
// served signed over HTTP (loopback here), unpacked, hash-checked, renamed into place. Against,
// in the same run, on the same tree: `cp -a` of it and a bare `tar -c | tar -x` pipe (the floor
// of any tar-based copy). The tree is the largest `built-*` rootfs in the templates dir (e2e's
// prepare builds the `postgres`, `agent` and `browser` examples from Dockerfiles).
// Not a test: it asserts nothing.   node --import tsx bench/rootfs-transfer.ts [--iterations N]
import { execFileSync, execSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { defaultAgentConfig } from '@forkbox/agent'
import { fetchImage, imageSignature, serveImage } from '../apps/agent/src/remote/images.ts'
import { expectedDigest, exportImage } from '../apps/agent/src/sandboxes/image-transfer.ts'
import { exportRootfs, importRootfs } from '../apps/agent/src/templates/rootfs-transfer.ts'
import { N, printSummary, report, timed } from './lib.ts'

const RUNS = Math.min(N, 5)
const templatesDir = process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir
const bytesOf = (dir: string) => Number(execFileSync('du', ['-sb', '--apparent-size', dir]).toString().split('\t')[0])
const built = readdirSync(templatesDir)
  .filter((n) => /^built-[0-9a-f]{16}$/.test(n))
  .map((n) => ({ n, bytes: bytesOf(join(templatesDir, n)) }))
  .sort((a, b) => b.bytes - a.bytes)[0]
if (!built) throw new Error(`no built-* rootfs in ${templatesDir}: build a template from a Dockerfile first`)
const src = join(templatesDir, built.n)
// beside the templates dir: the same filesystem, as a real pull's scratch dir is
const work = mkdtempSync(join(templatesDir, '.bench-rootfs-'))
const credential = 'bench-credential'
const server = createServer((req, res) => {
  const served = serveImage(req, res, {
    credential: () => credential,
    exportImage: async (id, skip) => exportImage(join(work, id), skip),
    exportRootfs: (name, skip) => exportRootfs(join(templatesDir, name), skip),
  })
  if (!served) res.writeHead(404).end()
})
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
const port = (server.address() as { port: number }).port
console.error(`rootfs ${built.n}: ${(built.bytes / 1e6).toFixed(0)} MB in files`)

let i = 0
const fresh = () => join(work, `copy-${i++}`)
const drop = (dir: string) => rmSync(dir, { recursive: true, force: true })
/** `--only pull`: the pull alone (the baselines take minutes on a slow disk). */
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined
try {
  const copies = await timed(only === 'pull' ? 0 : RUNS, async () => {
    const dst = fresh()
    execSync('sync')
    const t0 = performance.now()
    execFileSync('cp', ['-a', src, dst])
    const ms = performance.now() - t0
    drop(dst)
    return ms
  })
  report('cp -a of the rootfs (baseline)', copies)
  const pipes = await timed(only === 'pull' ? 0 : RUNS, async () => {
    const dst = fresh()
    mkdirSync(dst)
    execSync('sync')
    const t0 = performance.now()
    execSync(`tar -C '${src}' --numeric-owner -cf - . | tar -C '${dst}' --numeric-owner -xpf -`)
    const ms = performance.now() - t0
    drop(dst)
    return ms
  })
  report('tar -c | tar -x of the rootfs (baseline)', pipes)
  const pulls = await timed(RUNS, async () => {
    const dst = fresh()
    execSync('sync')
    const t0 = performance.now()
    const expires = Date.now() + 60_000
    const sig = imageSignature(credential, built.n, expires, 'rootfs')
    const { body, sha256 } = await fetchImage(
      `http://127.0.0.1:${port}/v1/agent/rootfs/${built.n}?expires=${expires}&sig=${sig}`,
    )
    await importRootfs(dst, join(work, `pulling-${i}`), body, expectedDigest(null, sha256))
    const ms = performance.now() - t0
    drop(dst)
    return ms
  })
  report('forkbox pull of the rootfs (HTTP, hash-checked)', pulls)
  const mbps = (ms: number) => (built.bytes / 1e6 / (ms / 1000)).toFixed(0)
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
  console.error(
    `MB/s at p50: cp -a ${mbps(p50(copies))}, tar pipe ${mbps(p50(pipes))}, forkbox pull ${mbps(p50(pulls))}`,
  )
} finally {
  server.close()
  drop(work)
}
printSummary()
