// Template rootfs from an OCI image in a registry, without a Docker engine: skopeo pulls it into a
// pull cache keyed by manifest digest, umoci unpacks it beside the target, a rename publishes it.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  closeSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { AppError } from '@forkbox/protocol'
import { GUEST_DIR } from '../runtime/oci-spec.ts'
import { type ByteBound, boundError, openWriteArea, type WriteArea } from './build-disk.ts'
import { formatImageReference, type ImageReference, parseImageReference, registryIsInsecure } from './image-ref.ts'
import { tempName } from './layers.ts'

export interface OciOptions {
  /** Pulled images, one OCI layout per manifest digest. */
  cacheDir: string
  insecureRegistries: readonly string[]
  /** Bounds of one skopeo or umoci call. */
  resolveTimeoutMs?: number
  pullTimeoutMs?: number
  unpackTimeoutMs?: number
  log?: (message: string) => void
  /** Credentials by registry (`host[:port]`, as in the reference), for this pull only. */
  auth?: RegistryAuth
  /**
   * Ask the registry even for a reference pinned by digest (a manifest fetch): a user's build
   * must show it may read the image before the pull cache serves it what another key pulled.
   */
  verifyAccess?: boolean
  /** Runs a registry command where pulls may run (pull-network.ts); none: the host's network (tests). */
  network?: { command(registry: string, cmd: string, args: string[]): Promise<[string, string[]]> }
  /** Most bytes one pull, unpack or archive import writes (on a scratch disk of that size); none: unbounded. */
  bound?: ByteBound
  /** Where scratch disks are made (the layer store's root: its recovery takes down what a crash left). */
  scratchDir?: string
}

export type RegistryAuth = Record<string, { username: string; password: string }>

/**
 * Runs `fn` with skopeo's arguments naming a temporary auth file (0600, in a 0700 dir, removed
 * after) when there are credentials: never on a command line, where `ps` would show them.
 */
async function withAuthFile<T>(opts: OciOptions, flag: string, fn: (args: string[]) => Promise<T>): Promise<T> {
  const entries = Object.entries(opts.auth ?? {})
  if (entries.length === 0) return fn([])
  const dir = mkdtempSync(join(tmpdir(), 'forkbox-auth-'))
  try {
    const auths = Object.fromEntries(
      entries.map(([registry, c]) => [
        registry,
        { auth: Buffer.from(`${c.username}:${c.password}`).toString('base64') },
      ]),
    )
    const file = join(dir, 'auth.json')
    writeFileSync(file, JSON.stringify({ auths }), { mode: 0o600 })
    return await fn([`${flag}=${file}`])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const TAG = 'image'

interface RunResult {
  stdout: Buffer
}

/** Runs skopeo for a pull from `ref`'s registry where pulls run (the pull network, unless allow-listed). */
async function runRegistry(ref: ImageReference, opts: OciOptions, args: string[], timeoutMs: number) {
  const [cmd, argv] = opts.network ? await opts.network.command(ref.registry, 'skopeo', args) : ['skopeo', args]
  return run(cmd, argv, timeoutMs)
}

/** A dir to write into bounded by `opts.bound`, on a scratch disk in a temp dir of the layer store's; unbounded, `fallback`. */
function writeArea(opts: OciOptions, fallback: string, what: string): Promise<WriteArea> {
  const parent = join(opts.scratchDir ?? dirname(opts.cacheDir), tempName())
  return openWriteArea({ maxBytes: opts.bound?.maxBytes, parent, fallback, what })
}

/** Runs a tool bounded in time; its failure carries stderr for the caller to classify. */
function run(cmd: string, args: string[], timeoutMs: number): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024, encoding: 'buffer' },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout })
        const timedOut = err.killed || err.signal === 'SIGKILL'
        reject(new ToolError(cmd, stderr.toString('utf8').trim() || err.message, timedOut))
      },
    )
  })
}

class ToolError extends Error {
  constructor(
    readonly tool: string,
    readonly stderr: string,
    readonly timedOut: boolean,
  ) {
    super(`${tool}: ${stderr}`)
  }
}

function registryError(image: string, err: unknown): AppError {
  if (!(err instanceof ToolError)) return new AppError('INTERNAL', `pulling ${image} failed: ${String(err)}`)
  return classifyRegistryFailure(image, err.stderr, err.timedOut)
}

/** skopeo's failure (its stderr) as the user's error: missing image, registry away, credentials refused. */
export function classifyRegistryFailure(image: string, stderr: string, timedOut: boolean): AppError {
  // skopeo's fatal line carries the reason last; keep it short for the user
  const reason = (/msg="(.*)"\s*$/m.exec(stderr)?.[1] ?? stderr).replace(/\\"/g, '"').slice(-500)
  const details = { image, reason }
  if (timedOut) return new AppError('REGISTRY_UNREACHABLE', `registry of ${image} did not answer in time`, details)
  if (/manifest unknown|name unknown|not found|no such image/i.test(reason))
    return new AppError('IMAGE_NOT_FOUND', `image ${image} not found in its registry`, details)
  if (/unauthorized|authentication required|denied|\b40[13]\b/i.test(reason))
    return new AppError('REGISTRY_AUTH_FAILED', `registry refused to serve ${image}: ${reason}`, details)
  return new AppError('REGISTRY_UNREACHABLE', `registry of ${image} unreachable: ${reason}`, details)
}

function tlsArgs(ref: ImageReference, opts: OciOptions, flag: string): string[] {
  return registryIsInsecure(ref.registry, opts.insecureRegistries) ? [`${flag}=false`] : []
}

/** The manifest digest an image reference names now (a tag moves; a digest is itself). */
export async function resolveImageDigest(image: string, opts: OciOptions): Promise<string> {
  const ref = parseImageReference(image)
  if (ref.digest && !opts.verifyAccess) return ref.digest
  try {
    const { stdout } = await withAuthFile(opts, '--authfile', (auth) =>
      runRegistry(
        ref,
        opts,
        ['inspect', '--raw', ...auth, ...tlsArgs(ref, opts, '--tls-verify'), `docker://${formatImageReference(ref)}`],
        opts.resolveTimeoutMs ?? 60_000,
      ),
    )
    // the digest of a manifest is the sha256 of its bytes as served
    return `sha256:${createHash('sha256').update(stdout).digest('hex')}`
  } catch (err) {
    if (err instanceof AppError) throw err
    throw registryError(image, err)
  }
}

function layoutOf(cacheDir: string, digest: string): string {
  return join(cacheDir, digest.replace(':', '-'))
}

/** Pulls in flight, by cache path: two templates naming one image at once share one pull. */
const pulling = new Map<string, Promise<{ layout: string; pulled: boolean }>>()

/** The image's OCI layout in the pull cache: fetched only when this digest was never pulled. */
export function pullImage(
  image: string,
  digest: string,
  opts: OciOptions,
): Promise<{ layout: string; pulled: boolean }> {
  const key = layoutOf(opts.cacheDir, digest)
  let pull = pulling.get(key)
  if (!pull) {
    pull = pullOnce(image, digest, opts).finally(() => pulling.delete(key))
    pulling.set(key, pull)
  }
  return pull
}

async function pullOnce(image: string, digest: string, opts: OciOptions): Promise<{ layout: string; pulled: boolean }> {
  const ref = parseImageReference(image)
  const layout = layoutOf(opts.cacheDir, digest)
  if (existsSync(layout)) {
    opts.log?.(`image ${image} (${digest}) from the pull cache`)
    return { layout, pulled: false }
  }
  mkdirSync(opts.cacheDir, { recursive: true })
  // beside the templates dir's other half-written builds: recovery removes it if we die
  const tmp = join(dirname(opts.cacheDir), `.oci-${digest.slice(7, 23)}.tmp-${process.pid}`)
  rmSync(tmp, { recursive: true, force: true })
  opts.log?.(`pulling ${image} (${digest})`)
  const area = await writeArea(opts, tmp, `pulling ${image}`)
  try {
    await withAuthFile(opts, '--src-authfile', (auth) =>
      runRegistry(
        ref,
        opts,
        [
          'copy',
          '--quiet',
          ...auth,
          ...tlsArgs(ref, opts, '--src-tls-verify'),
          `docker://${formatImageReference(ref, digest)}`,
          `oci:${area.dir}:${TAG}`,
        ],
        opts.pullTimeoutMs ?? 15 * 60_000,
      ),
    )
    await area.keep()
  } catch (err) {
    const full = area.full()
    rmSync(tmp, { recursive: true, force: true })
    if (err instanceof AppError) throw err
    if (full && opts.bound) throw boundError(`pulling ${image}`, opts.bound, { image })
    throw registryError(image, err)
  } finally {
    await area.release()
  }
  if (existsSync(layout)) rmSync(tmp, { recursive: true, force: true })
  else renameSync(tmp, layout)
  return { layout, pulled: true }
}

/**
 * Unpacks a pulled image into `target` (beside it first, then renamed). As root, not rootless: the
 * files keep the owners the image gives them.
 */
export async function unpackImage(layout: string, target: string, opts: OciOptions): Promise<void> {
  const bundle = `${target}.building-${process.pid}`
  rmSync(bundle, { recursive: true, force: true })
  const area = await writeArea(opts, bundle, 'unpacking the image')
  try {
    try {
      await run('umoci', ['unpack', '--image', `${layout}:${TAG}`, area.dir], opts.unpackTimeoutMs ?? 15 * 60_000)
    } catch (err) {
      if (area.full() && opts.bound) throw boundError('unpacking the image', opts.bound)
      throw err
    }
    await area.keep()
    prepareRootfs(join(bundle, 'rootfs'))
    if (existsSync(target)) rmSync(bundle, { recursive: true, force: true })
    else {
      renameSync(join(bundle, 'rootfs'), `${bundle}-rootfs`)
      rmSync(bundle, { recursive: true, force: true })
      renameSync(`${bundle}-rootfs`, target)
    }
  } catch (err) {
    await area.release()
    rmSync(bundle, { recursive: true, force: true })
    rmSync(`${bundle}-rootfs`, { recursive: true, force: true })
    if (err instanceof AppError) throw err
    const reason = err instanceof ToolError ? err.stderr.slice(-500) : String(err)
    throw new AppError('INTERNAL', `unpacking the image failed: ${reason}`)
  }
}

/**
 * A path inside an untrusted rootfs, refused if any directory on the way is a symlink: what we
 * write there must never land on the host through a link the image planted.
 */
function inside(root: string, rel: string): string {
  let at = root
  for (const part of dirname(rel)
    .split('/')
    .filter((p) => p && p !== '.')) {
    at = join(at, part)
    if (!existsSync(at)) mkdirSync(at, { mode: 0o755 })
    else if (lstatSync(at).isSymbolicLink())
      throw new AppError('VALIDATION_FAILED', `the image's /${rel} is under a symlink (/${at.slice(root.length + 1)})`)
  }
  return join(root, rel)
}

function hasEntry(root: string, rel: string): boolean {
  try {
    lstatSync(inside(root, rel))
    return true
  } catch {
    return false
  }
}

/** Replaces a file (or a symlink) inside the rootfs without following a link. */
function writeInside(root: string, rel: string, content: string, append = false): void {
  const path = inside(root, rel)
  if (!append) rmSync(path, { force: true })
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | (append ? constants.O_APPEND : 0)
  const fd = openSync(path, flags, 0o644)
  try {
    writeSync(fd, content)
  } finally {
    closeSync(fd)
  }
}

/**
 * What the guest needs of a rootfs, as build.ts gives a debootstrap one (never running the image's
 * binaries): its mount point, /work, names and the default user. It brings its own Python.
 */
function prepareRootfs(root: string, user = 'user'): void {
  inside(root, 'opt/forkbox/x')
  inside(root, 'work/x')
  writeInside(root, 'etc/hostname', 'sandbox\n')
  writeInside(root, 'etc/resolv.conf', 'nameserver 127.0.0.1\n')
  // root and the default user, where the image does not name them (a busybox or scratch image has no /etc)
  addEntries(root, 'etc/passwd', [
    ['root', 'root:x:0:0:root:/root:/bin/sh'],
    [user, `${user}:x:1000:1000::/home/${user}:/bin/sh`],
  ])
  addEntries(root, 'etc/group', [
    ['root', 'root:x:0:'],
    [user, `${user}:x:1000:`],
  ])
  inside(root, 'root/x')
  // the guest's sudo (the image's own cannot work: gVisor ignores set-user-ID bits), ahead of
  // /usr/bin on every PATH; a Dockerfile step may put its own there
  if (!hasEntry(root, 'usr/local/sbin/sudo'))
    symlinkSync(`${GUEST_DIR}/forkbox_sudo.py`, inside(root, 'usr/local/sbin/sudo'))
}

/** Appends the `[name, line]` entries whose name `file` (passwd or group) lacks. */
function addEntries(root: string, file: string, entries: [string, string][]): void {
  const text = hasEntry(root, file) ? readText(inside(root, file)) : ''
  const names = new Set(text.split('\n').map((l) => l.split(':')[0]))
  const missing = entries.filter(([name]) => !names.has(name)).map(([, line]) => `${line}\n`)
  if (missing.length > 0)
    writeInside(root, file, `${text && !text.endsWith('\n') ? '\n' : ''}${missing.join('')}`, true)
}

function readText(path: string): string {
  if (lstatSync(path).isSymbolicLink())
    throw new AppError('VALIDATION_FAILED', `the image's ${path.slice(path.lastIndexOf('/etc/'))} is a symlink`)
  // O_NOFOLLOW: a passwd swapped for a link meanwhile is not read through either
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/** An image's `USER` (`name`, `name:group`, `uid[:gid]`) as the user name a sandbox defaults to, if it is one. */
export function userNameOf(user: string | undefined): string | undefined {
  const name = user?.split(':')[0]
  return name && /^[a-z_][a-z0-9_-]*$/.test(name) ? name : undefined
}

/** What a template takes of an image's own config: Docker's env, working dir and user. */
export interface OciImageConfig {
  env: Record<string, string>
  workdir: string | undefined
  user: string | undefined
}

const Digest = /^sha256:[a-f0-9]{64}$/

/** A JSON blob of the layout by its digest (checked: the layout came from a registry or an upload). */
function readBlob(layout: string, digest: unknown): unknown {
  if (typeof digest !== 'string' || !Digest.test(digest))
    throw new AppError('VALIDATION_FAILED', `the image names a blob by a malformed digest`)
  const path = join(layout, 'blobs', 'sha256', digest.slice(7))
  if (lstatSync(path).size > 4 * 1024 * 1024) throw new AppError('VALIDATION_FAILED', 'the image config is too large')
  return JSON.parse(readText(path))
}

/**
 * The image's config as Docker reads it (`Env`, `WorkingDir`, `User`) from its layout in the pull
 * cache. Its `Cmd`/`Entrypoint` are not taken: like E2B, a template starts what its Dockerfile's
 * CMD or the build's startCmd says, not a base image's shell or REPL.
 */
export function readImageConfig(layout: string): OciImageConfig {
  try {
    const index = JSON.parse(readText(join(layout, 'index.json'))) as { manifests?: { digest?: unknown }[] }
    const manifest = readBlob(layout, index.manifests?.[0]?.digest) as { config?: { digest?: unknown } }
    const blob = readBlob(layout, manifest.config?.digest) as {
      config?: { Env?: unknown; WorkingDir?: unknown; User?: unknown }
    }
    const c = blob.config ?? {}
    const env: Record<string, string> = {}
    for (const line of Array.isArray(c.Env) ? c.Env : []) {
      if (typeof line !== 'string') continue
      const eq = line.indexOf('=')
      if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1)
    }
    const text = (v: unknown) => (typeof v === 'string' && v.length > 0 && v.length <= 4096 ? v : undefined)
    return { env, workdir: text(c.WorkingDir), user: text(c.User) }
  } catch (err) {
    if (err instanceof AppError) throw err
    throw new AppError('VALIDATION_FAILED', `the image's config cannot be read: ${String(err)}`)
  }
}

/** The tar's entry names (an image archive has few: its manifests, configs and layer blobs). */
async function archiveEntries(file: string): Promise<Set<string>> {
  try {
    const { stdout } = await run('tar', ['-t', '-f', file], 5 * 60_000)
    return new Set(
      stdout
        .toString('utf8')
        .split('\n')
        .map((n) => n.replace(/^\.\//, '')),
    )
  } catch (err) {
    const reason = err instanceof ToolError ? err.stderr.slice(-300) : String(err)
    throw new AppError('VALIDATION_FAILED', `the upload is not a tar archive: ${reason}`)
  }
}

/**
 * Takes an uploaded image archive (`docker save` output, or an OCI layout as a tarball) into the
 * pull cache under the digest of its manifest, which is what builds then name it by.
 */
export async function importArchive(file: string, opts: OciOptions): Promise<string> {
  const entries = await archiveEntries(file)
  const transport =
    entries.has('oci-layout') && entries.has('index.json')
      ? 'oci-archive'
      : entries.has('manifest.json')
        ? 'docker-archive'
        : null
  if (!transport)
    throw new AppError(
      'VALIDATION_FAILED',
      'the upload is neither a `docker save` archive (manifest.json) nor an OCI layout tarball (oci-layout, index.json)',
    )
  mkdirSync(opts.cacheDir, { recursive: true })
  const tmp = join(
    dirname(opts.cacheDir),
    `.oci-archive.tmp-${process.pid}-${createHash('sha256').update(file).digest('hex').slice(0, 8)}`,
  )
  rmSync(tmp, { recursive: true, force: true })
  const area = await writeArea(opts, tmp, 'importing the image archive')
  try {
    opts.log?.(`importing an image archive (${transport})`)
    try {
      await run(
        'skopeo',
        ['copy', '--quiet', `${transport}:${file}`, `oci:${area.dir}:${TAG}`],
        opts.pullTimeoutMs ?? 15 * 60_000,
      )
    } catch (err) {
      if (area.full() && opts.bound) throw boundError('importing the image archive', opts.bound)
      throw err
    }
    await area.keep()
    const index = JSON.parse(readText(join(tmp, 'index.json'))) as { manifests?: { digest?: unknown }[] }
    const digest = index.manifests?.[0]?.digest
    if (typeof digest !== 'string' || !Digest.test(digest)) throw new Error('the imported layout names no manifest')
    const layout = layoutOf(opts.cacheDir, digest)
    if (existsSync(layout)) rmSync(tmp, { recursive: true, force: true })
    else renameSync(tmp, layout)
    return digest
  } catch (err) {
    await area.release()
    rmSync(tmp, { recursive: true, force: true })
    if (err instanceof AppError) throw err
    const reason = err instanceof ToolError ? err.stderr.slice(-500) : String(err)
    throw new AppError('VALIDATION_FAILED', `the image archive cannot be read: ${reason}`)
  }
}
