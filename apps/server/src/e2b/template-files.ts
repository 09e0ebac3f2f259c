// The files E2B's `copy()` steps upload (a tar or tar.gz each, named by the client's hash), kept per
// key under the data dir for a while, and assembled into one build context: step N's files under
// `e2b/N/`. An upload is checked as it is stored (no absolute or `..` paths, no link leaving it, no
// devices); the agent checks the assembled context again.
import { createHash, randomBytes } from 'node:crypto'
import {
  closeSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
} from 'node:fs'
import { join, posix } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import { AppError } from '@forkbox/protocol'
import { extract, type Header, type Pack, pack } from 'tar-stream'

const MAX_ENTRIES = 100_000

function badEntry(name: string, why: string): AppError {
  return new AppError('INVALID_PATH', `uploaded file ${JSON.stringify(name)}: ${why}`, { entry: name })
}

/** A path inside the upload's root, normalized; `.` for the root itself. */
function inside(name: string, from = '.'): string {
  if (name.startsWith('/')) throw badEntry(name, 'absolute paths are not allowed')
  const n = posix.normalize(posix.join(from, name)).replace(/\/+$/, '')
  if (n === '..' || n.startsWith('../')) throw badEntry(name, 'leaves the uploaded directory')
  return n === '' ? '.' : n
}

export class TemplateFiles {
  constructor(
    private readonly dir: string,
    /** Largest upload, and largest sum of file sizes in one (or in one assembled context). */
    private readonly maxBytes: number,
  ) {}

  private ownerDir(owner: string): string {
    return join(this.dir, createHash('sha256').update(owner).digest('hex').slice(0, 24))
  }

  private path(owner: string, hash: string): string {
    return join(this.ownerDir(owner), `${hash}.tar`)
  }

  /** Whether the owner's upload for `hash` is here (its clock restarts: it is in use). */
  has(owner: string, hash: string): boolean {
    const p = this.path(owner, hash)
    if (!existsSync(p)) return false
    const now = new Date()
    utimesSync(p, now, now)
    return true
  }

  /** Stores an upload (a tar, gzipped or not) as a checked, uncompressed tar; replaces an earlier one. */
  async put(owner: string, hash: string, body: Readable): Promise<void> {
    const dir = this.ownerDir(owner)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tmp = join(dir, `.${hash}.${randomBytes(6).toString('hex')}`)
    try {
      await pipeline(body, createWriteStream(`${tmp}.raw`, { mode: 0o600 }))
      const out = pack()
      const done = pipeline(out, createWriteStream(tmp, { mode: 0o600 }))
      try {
        await this.copyEntries(`${tmp}.raw`, out, '', true)
        out.finalize()
      } catch (err) {
        out.destroy()
        await done.catch(() => {})
        throw err
      }
      await done
      renameSync(tmp, this.path(owner, hash))
    } finally {
      rmSync(`${tmp}.raw`, { force: true })
      rmSync(tmp, { force: true })
    }
  }

  /**
   * Writes the build context for `copies` to `target`: each step's upload under `e2b/<step>/`.
   * A missing upload is the client's error, naming its step.
   */
  async context(owner: string, copies: { step: number; hash: string }[], target: string): Promise<void> {
    let total = 0
    for (const c of copies) {
      if (!this.has(owner, c.hash))
        throw new AppError(
          'VALIDATION_FAILED',
          `step ${c.step} (COPY): its files (hash ${c.hash}) were not uploaded, or expired: build again`,
          { step: String(c.step) },
        )
      total += statSync(this.path(owner, c.hash)).size
      if (total > this.maxBytes)
        throw new AppError('PAYLOAD_TOO_LARGE', `the files of the COPY steps are larger than ${this.maxBytes} bytes`)
    }
    const out = pack()
    const done = pipeline(out, createWriteStream(target, { mode: 0o600 }))
    try {
      for (const c of copies) await this.copyEntries(this.path(owner, c.hash), out, `e2b/${c.step}/`, false)
      out.finalize()
    } catch (err) {
      out.destroy()
      await done.catch(() => {})
      rmSync(target, { force: true })
      throw err
    }
    await done
  }

  /** Removes uploads not used for `maxAgeMs` (a build takes its files into its context when it starts). */
  sweep(maxAgeMs: number): void {
    if (!existsSync(this.dir)) return
    const before = Date.now() - maxAgeMs
    for (const owner of readdirSync(this.dir)) {
      const dir = join(this.dir, owner)
      for (const f of readdirSync(dir)) {
        const p = join(dir, f)
        if (statSync(p).mtimeMs < before) rmSync(p, { force: true })
      }
    }
  }

  /**
   * Reads the tar at `from` (gzipped or not) into `out`, its paths under `prefix`; with `check`,
   * refuses what could reach outside the upload and caps sizes as it goes.
   */
  private async copyEntries(from: string, out: Pack, prefix: string, check: boolean): Promise<void> {
    const ex = extract()
    const seen = new Map<string, string>()
    let total = 0
    let entries = 0
    const verify = (h: Header): string | null => {
      const name = inside(h.name)
      if (name === '.') return null
      if (++entries > MAX_ENTRIES)
        throw new AppError('PAYLOAD_TOO_LARGE', `an upload has at most ${MAX_ENTRIES} entries`)
      if (seen.has(name)) throw badEntry(h.name, 'appears twice')
      const parts = name.split('/')
      for (let i = 1; i < parts.length; i++)
        if (seen.get(parts.slice(0, i).join('/')) === 'symlink') throw badEntry(h.name, 'goes through a symlink')
      switch (h.type) {
        case 'file':
        case 'contiguous-file':
          total += h.size ?? 0
          if (total > this.maxBytes)
            throw new AppError('PAYLOAD_TOO_LARGE', `the upload's files are larger than ${this.maxBytes} bytes`)
          break
        case 'directory':
          break
        case 'symlink':
          inside(h.linkname ?? '', posix.dirname(name))
          break
        case 'link':
          if (seen.get(inside(h.linkname ?? '')) !== 'file') throw badEntry(h.name, 'hardlink to no earlier file')
          break
        default:
          throw badEntry(h.name, `${h.type} entries are not allowed`)
      }
      seen.set(name, h.type === 'contiguous-file' ? 'file' : (h.type ?? 'file'))
      return name
    }
    ex.on('entry', (h, body, next) => {
      body.on('error', () => {})
      let name: string | null
      try {
        name = check ? verify(h) : h.name
      } catch (err) {
        body.resume()
        ex.destroy(err as Error)
        return
      }
      if (name === null) {
        body.on('end', () => next())
        body.resume()
        return
      }
      const header: Partial<Header> & { name: string } = {
        name: prefix + name,
        type: h.type === 'contiguous-file' ? 'file' : h.type,
        mode: (h.mode ?? 0o644) & 0o7777,
        mtime: h.mtime,
        size: h.type === 'file' || h.type === 'contiguous-file' ? h.size : 0,
      }
      if (h.type === 'symlink') header.linkname = h.linkname
      if (h.type === 'link') header.linkname = prefix + (check ? inside(h.linkname ?? '') : h.linkname)
      const entry = out.entry(header, (err) => (err ? ex.destroy(err) : next()))
      if (header.type === 'file') pipeline(body, entry).catch((err: Error) => ex.destroy(err))
      else body.resume()
    })
    const gzipped = isGzip(from)
    try {
      if (gzipped) await pipeline(createReadStream(from), createGunzip(), ex)
      else await pipeline(createReadStream(from), ex)
    } catch (err) {
      if (err instanceof AppError) throw err
      throw new AppError(
        'VALIDATION_FAILED',
        `the upload is not a tar${gzipped ? '.gz' : ''} archive: ${err instanceof Error ? err.message : String(err)}`,
      )
    }
  }
}

function isGzip(path: string): boolean {
  const fd = openSync(path, 'r')
  try {
    const b = Buffer.alloc(2)
    return readSync(fd, b, 0, 2, 0) === 2 && b[0] === 0x1f && b[1] === 0x8b
  } finally {
    closeSync(fd)
  }
}
