// A built template's rootfs between hosts: the whole tree as one tar stream (GNU tar: owners by
// number, modes, times, symlinks and hardlinks kept) with its SHA-256, and back. The stream is the
// same bytes every time (names in order; the tree never changes once built), so a cut transfer
// resumes from the byte it reached. An import is unpacked beside its place and renamed there only
// once its bytes match the sender's hash.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { basename } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { AppError } from '@forkbox/protocol'
import { type ExportedImage, hashedStream, importChecked } from '../sandboxes/image-transfer.ts'
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

/**
 * Unpacks the rootfs from `body` at `tmp` (a scratch dir on the same filesystem, removed if it is
 * left after a crash) and renames it to `dir` once its bytes hash to what `sha256` resolves to.
 * GNU tar refuses names with `..` and absolute names, and writes nothing through a symlink the
 * archive made (such links are made last), so nothing lands outside `tmp`.
 */
export function importRootfs(
  dir: string,
  tmp: string,
  body: AsyncIterable<Uint8Array>,
  sha256: Promise<string>,
): Promise<number> {
  return importChecked(dir, tmp, body, sha256, 'template image', async (bytes) => {
    const args = ['--extract', '--file=-', '--numeric-owner', '--same-owner', '--same-permissions', '-C', tmp]
    // tar -x writes nothing to its stdout
    const { child, exited, stderr } = runTar(args)
    try {
      await pipeline(Readable.from(bytes), child.stdin)
    } catch (err) {
      child.kill('SIGKILL')
      await exited.catch(() => {})
      throw err
    }
    const code = await exited
    if (code !== 0)
      throw new AppError('INTERNAL', `unpacking the template image failed (tar exit ${code}): ${stderr()}`)
  })
}
