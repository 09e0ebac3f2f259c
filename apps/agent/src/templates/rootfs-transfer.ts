// A built template's rootfs between hosts: the whole tree as one tar stream (GNU tar: owners by
// number, modes, times, symlinks and hardlinks kept) with its SHA-256, and back. The stream is the
// same bytes every time (names in order; the tree never changes once built), so a cut transfer
// resumes from the byte it reached, and its hash, taken once on the host that built it, is the
// record every later copy is checked against. An import is unpacked as root only after its bytes
// matched that record and its entries were checked, and renamed to its place only once whole.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { basename, join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { AppError } from '@forkbox/protocol'
import { extract } from 'tar-stream'
import {
  digestMismatch,
  digestOf,
  type ExpectedDigest,
  type ExportedImage,
  hashedStream,
} from '../sandboxes/image-transfer.ts'
import { diskUsage } from './layers.ts'

/** The only names a pulled rootfs may have: what `builtRootfsPath` makes. */
export const BUILT_ROOTFS = /^built-[0-9a-f]{16}$/

/** GNU tar with `args` (its three streams piped): the child, its exit code once it closed, and its stderr's tail. */
function runTar(args: string[]) {
  const child = spawn('tar', args, { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000)
  })
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  exited.catch(() => {})
  return { child, exited, stderr: () => stderr.trim() }
}

/** Runs tar with `args`; its stdout as it comes, failing when tar does (its stderr's tail in the error). */
async function* tarOutput(args: string[]): AsyncGenerator<Buffer> {
  const { child, exited, stderr } = runTar(args)
  child.stdin.end()
  try {
    yield* child.stdout as AsyncIterable<Buffer>
    const code = await exited
    if (code !== 0) throw new Error(`tar exited ${code}: ${stderr()}`)
  } finally {
    // a reader that stopped early: tar is not left writing to no one
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
}

/** The rootfs at `dir` as a tar stream from byte `skip` on, and the whole stream's SHA-256. */
export async function exportRootfs(dir: string, skip = 0): Promise<ExportedImage> {
  if (!BUILT_ROOTFS.test(basename(dir)) || !existsSync(dir))
    throw new AppError('TEMPLATE_UNAVAILABLE', 'no such template image on this host', { rootfs: basename(dir) })
  const sizeBytes = await diskUsage(dir)
  const tar = tarOutput(['--create', '--file=-', '--sort=name', '--numeric-owner', '--format=gnu', '-C', dir, '.'])
  return { sizeBytes, ...hashedStream(tar, skip) }
}

/** Digests of rootfs dirs this process hashed, by dir and inode: a built rootfs never changes once made. */
const digests = new Map<string, Promise<string>>()

/**
 * The SHA-256 of the rootfs at `dir` as `exportRootfs` streams it (the same bytes every time): what
 * a build reports for the control plane to record and check other hosts' pulls against.
 */
export function rootfsDigest(dir: string): Promise<string> {
  const key = `${dir}\0${statSync(dir).ino}`
  let digest = digests.get(key)
  if (!digest) {
    digest = exportRootfs(dir).then(digestOf)
    digest.catch(() => digests.delete(key))
    digests.set(key, digest)
  }
  return digest
}

/**
 * The character devices a rootfs may hold, as `major:minor`: an overlay whiteout (0:0) and the
 * pseudo devices debootstrap makes in `/dev` (null, zero, full, random, urandom, tty, console,
 * ptmx), which a template built `FROM forkbox:base` keeps. None reaches hardware or kernel memory;
 * the sandbox sees gVisor's own `/dev` anyway.
 */
const ALLOWED_DEVICES = new Set(['0:0', '1:3', '1:5', '1:7', '1:8', '1:9', '5:0', '5:1', '5:2'])

/** Where an entry's name leads, as parts under the root ('' for the root itself); null: out of it. */
function insideParts(name: string): string[] | null {
  if (name.startsWith('/')) return null
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  return parts.includes('..') ? null : parts
}

/**
 * Checks every entry of the rootfs tar at `file` before anything of it is unpacked as root: each
 * stays inside the root (no absolute name, no `..`, nothing under a symlink or a file the archive
 * made, no name twice), a hardlink names an earlier non-directory of the archive, and only files,
 * dirs, symlinks and hardlinks are made (a device node only from `ALLOWED_DEVICES`). A
 * symlink's target is not checked: it is read inside the sandbox, whose root this is.
 */
export async function checkRootfsEntries(file: string): Promise<void> {
  const seen = new Map<string, 'dir' | 'other'>()
  const refuse = (name: string, why: string) =>
    new AppError('VALIDATION_FAILED', `template image refused: entry ${JSON.stringify(name)} ${why}`)
  const untar = extract()
  untar.on('entry', (header, stream, next) => {
    const fail = (err: AppError) => {
      // the entry's stream goes down with the archive's: its error is the archive's, reported once
      stream.on('error', () => {})
      stream.resume()
      untar.destroy(err)
    }
    const parts = insideParts(header.name)
    if (!parts) return fail(refuse(header.name, 'leads outside the image'))
    const path = parts.join('/')
    for (let i = 1; i < parts.length; i++) {
      if (seen.get(parts.slice(0, i).join('/')) === 'other')
        return fail(refuse(header.name, 'goes through a link or file of the image'))
    }
    if (seen.has(path)) return fail(refuse(header.name, 'is in the image twice'))
    const type = header.type
    if (type === 'link') {
      const target = insideParts(header.linkname ?? '')
      if (!target || seen.get(target.join('/')) !== 'other')
        return fail(refuse(header.name, `is a hardlink to ${JSON.stringify(header.linkname)}, not to a file before it`))
    } else if (type === 'character-device') {
      if (!ALLOWED_DEVICES.has(`${header.devmajor}:${header.devminor}`))
        return fail(refuse(header.name, `is a device node (${header.devmajor}:${header.devminor})`))
    } else if (type === 'directory') {
      if (path === '' && seen.size > 0) return fail(refuse(header.name, 'is the root after other entries'))
    } else if (type !== 'file' && type !== 'symlink') {
      return fail(refuse(header.name, `is a ${type}`))
    }
    seen.set(path, type === 'directory' ? 'dir' : 'other')
    stream.on('end', () => next())
    stream.resume()
  })
  await pipeline(createReadStream(file, { highWaterMark: 1024 * 1024 }), untar)
}

/**
 * Takes in the rootfs from `body`, renamed to `dir` once whole. Nothing is unpacked before the
 * check: the stream goes to a file in `tmp` (a new scratch dir on the same filesystem, removed if it
 * is left after a crash), hashed as it goes; only when its hash is what `expected` says (the
 * control plane's record of the holder's build) and every entry passes `checkRootfsEntries` is it
 * unpacked (owners and modes kept: a rootfs has setuid binaries and users' homes). On any failure
 * `tmp` goes and `dir` is not made. Resolves with the bytes read (0: `dir` was there already).
 */
export async function importRootfs(
  dir: string,
  tmp: string,
  body: AsyncIterable<Uint8Array>,
  expected: ExpectedDigest,
): Promise<number> {
  if (existsSync(dir)) return 0
  mkdirSync(tmp, { recursive: true, mode: 0o700 })
  const file = join(tmp, 'rootfs.tar')
  const root = join(tmp, 'root')
  try {
    const hash = createHash('sha256')
    let bytes = 0
    await pipeline(
      Readable.from(
        (async function* () {
          for await (const c of body) {
            hash.update(c)
            bytes += c.length
            yield c
          }
        })(),
      ),
      createWriteStream(file, { mode: 0o600 }),
    )
    const got = hash.digest('hex')
    const want = await expected.sha256
    if (got !== want) throw digestMismatch('template image', got, want, expected.source)
    await checkRootfsEntries(file)
    mkdirSync(root, { mode: 0o700 })
    const args = ['--extract', `--file=${file}`, '--numeric-owner', '--same-owner', '--same-permissions', '-C', root]
    // tar -x writes nothing to its stdout
    const { child, exited, stderr } = runTar(args)
    child.stdin.end()
    const code = await exited
    if (code !== 0)
      throw new AppError('INTERNAL', `unpacking the template image failed (tar exit ${code}): ${stderr()}`)
    rmSync(file, { force: true })
    if (!existsSync(dir)) renameSync(root, dir)
    return bytes
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}
