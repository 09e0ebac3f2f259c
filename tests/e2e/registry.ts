// A local OCI registry for e2e tests (Debian's docker-registry on loopback, plain HTTP) and images
// pushed to it without a Docker engine: one layer from a directory tree, through umoci and skopeo.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { sharedTemplatesDir } from './harness.ts'

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0))
    })
  })
}

export class TestRegistry {
  port = 0
  private proc: ChildProcess | undefined

  /** `work` is the test's scratch dir: the registry's storage and the image layouts go there. */
  constructor(private readonly work: string) {}

  async start(): Promise<void> {
    this.port = await freePort()
    const config = join(this.work, 'registry.yml')
    writeFileSync(
      config,
      [
        'version: 0.1',
        'log: { level: error }',
        `storage: { filesystem: { rootdirectory: ${join(this.work, 'registry')} } }`,
        `http: { addr: "127.0.0.1:${this.port}" }`,
        '',
      ].join('\n'),
    )
    this.proc = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: 'ignore' })
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`http://127.0.0.1:${this.port}/v2/`).then(
        (r) => r.ok,
        () => false,
      )
      if (ok) return
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error('the test registry did not come up')
  }

  stop(): void {
    if (this.proc?.pid && this.proc.exitCode === null) process.kill(this.proc.pid, 'SIGKILL')
    this.proc = undefined
  }

  /** An OCI image of one layer (the tree at `rootfs`), pushed as `name`; returns its digest. */
  push(rootfs: string, name: string): string {
    const layout = join(this.work, 'layout')
    const layer = join(this.work, 'layer.tar')
    execFileSync('umoci', ['init', '--layout', layout])
    execFileSync('umoci', ['new', '--image', `${layout}:t`])
    execFileSync('tar', ['-C', rootfs, '-cf', layer, '.'])
    execFileSync('umoci', ['raw', 'add-layer', '--image', `${layout}:t`, layer])
    rmSync(layer)
    const digestFile = join(this.work, 'digest')
    execFileSync('skopeo', [
      'copy',
      '--quiet',
      '--dest-tls-verify=false',
      `--digestfile=${digestFile}`,
      `oci:${layout}:t`,
      `docker://127.0.0.1:${this.port}/${name}`,
    ])
    rmSync(layout, { recursive: true, force: true })
    return readFileSync(digestFile, 'utf8').trim()
  }
}

/**
 * A root (under `work`) holding only a static busybox and its applets' links: no Python, no libc,
 * no bash, no /etc. The guest brings its own runtime, so everything but runCode works in it.
 */
export function busyboxRootfs(work: string): string {
  const root = join(work, 'busybox')
  mkdirSync(join(root, 'bin'), { recursive: true })
  cpSync('/bin/busybox', join(root, 'bin/busybox'))
  const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)
  for (const a of applets) if (a !== 'busybox') symlinkSync('busybox', join(root, 'bin', a))
  return root
}

/** The baked `base` rootfs (prepare.ts built it): the newest `base-HASH` dir. */
export function baseRootfs(): string {
  const dirs = readdirSync(sharedTemplatesDir)
    .filter((n) => /^base-[0-9a-f]{16}$/.test(n))
    .map((n) => join(sharedTemplatesDir, n))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)
  if (!dirs[0]) throw new Error(`no base rootfs in ${sharedTemplatesDir}: run tests/e2e/prepare.ts`)
  return dirs[0]
}
