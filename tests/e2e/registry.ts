// A local OCI registry for e2e tests (Debian's docker-registry on a free loopback port), and images
// the tests make themselves from a rootfs dir and push to it.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { sharedTemplatesDir } from './harness.ts'

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0))
    })
  })
}

export interface TestRegistry {
  port: number
  /**
   * Pushes an OCI image of one layer (the tree at `rootfs`) as `name` (`repo:tag`), with `config`
   * as its image config (Docker's Env, WorkingDir, User); returns its digest.
   */
  push(rootfs: string, name: string, config?: ImageConfig): string
  stop(): void
}

export interface ImageConfig {
  env?: Record<string, string>
  workdir?: string
  user?: string
}

export interface RegistryLogin {
  username: string
  password: string
}

/**
 * Starts a registry keeping its storage (and push scratch) under `work`; with `login`, it serves
 * only that user (htpasswd, bcrypt: apache2-utils' htpasswd makes the file).
 */
export async function startRegistry(work: string, login?: RegistryLogin): Promise<TestRegistry> {
  const port = await freePort()
  const config = join(work, 'registry.yml')
  const htpasswd = join(work, 'htpasswd')
  if (login)
    writeFileSync(htpasswd, execFileSync('htpasswd', ['-Bbn', login.username, login.password], { encoding: 'utf8' }))
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log: { level: error }',
      `storage: { filesystem: { rootdirectory: ${join(work, 'registry')} } }`,
      `http: { addr: "127.0.0.1:${port}" }`,
      ...(login ? [`auth: { htpasswd: { realm: forkbox-test, path: ${htpasswd} } }`] : []),
      '',
    ].join('\n'),
  )
  let proc: ChildProcess | undefined = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: 'ignore' })
  const stop = () => {
    if (proc?.pid && proc.exitCode === null) process.kill(proc.pid, 'SIGKILL')
    proc = undefined
  }
  for (let i = 0; i < 100; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/v2/`).then(
      (r) => r.ok || r.status === 401,
      () => false,
    )
    if (ok) return { port, stop, push: (rootfs, name, config) => pushImage(work, port, rootfs, name, login, config) }
    await new Promise((r) => setTimeout(r, 100))
  }
  stop()
  throw new Error('the test registry did not come up')
}

/** An OCI layout at `layout` holding one image (tag `t`) of one layer, the tree at `rootfs`, with `config`. */
export function makeImageLayout(layout: string, rootfs: string, config: ImageConfig = {}): void {
  const layer = `${layout}.layer.tar`
  execFileSync('umoci', ['init', '--layout', layout])
  execFileSync('umoci', ['new', '--image', `${layout}:t`])
  execFileSync('tar', ['-C', rootfs, '-cf', layer, '.'])
  execFileSync('umoci', ['raw', 'add-layer', '--image', `${layout}:t`, layer])
  rmSync(layer)
  const settings = [
    ...Object.entries(config.env ?? {}).map(([k, v]) => `--config.env=${k}=${v}`),
    ...(config.workdir ? [`--config.workingdir=${config.workdir}`] : []),
    ...(config.user ? [`--config.user=${config.user}`] : []),
  ]
  if (settings.length) execFileSync('umoci', ['config', '--image', `${layout}:t`, ...settings])
}

function pushImage(
  work: string,
  port: number,
  rootfs: string,
  name: string,
  login?: RegistryLogin,
  config: ImageConfig = {},
): string {
  const layout = join(work, 'layout')
  makeImageLayout(layout, rootfs, config)
  const digestFile = join(work, 'digest')
  execFileSync('skopeo', [
    'copy',
    '--quiet',
    '--dest-tls-verify=false',
    ...(login ? [`--dest-creds=${login.username}:${login.password}`] : []),
    `--digestfile=${digestFile}`,
    `oci:${layout}:t`,
    `docker://127.0.0.1:${port}/${name}`,
  ])
  rmSync(layout, { recursive: true, force: true })
  return readFileSync(digestFile, 'utf8').trim()
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

/** Where the agent keeps a pulled image (its OCI layout) in the shared templates dir. */
export function pulledLayout(digest: string): string {
  return join(sharedTemplatesDir, '.oci', digest.replace(':', '-'))
}
