// Checks an uploaded build-context tarball entry by entry, streaming: nothing in it may reach outside its root.

import { posix } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { AppError } from '@forkbox/protocol'
import { extract, type Header } from 'tar-stream'

export interface ContextLimits {
  /** Cap on the sum of file sizes in the context. */
  maxBytes: number
  /** Cap on the number of entries (bounds header work on a tarball of empty files). */
  maxEntries?: number
}

export interface ContextSummary {
  /** Regular files, normalized relative paths, in archive order: what `.dockerignore` filters. */
  files: string[]
  totalBytes: number
  entries: number
}

const defaultMaxEntries = 200_000

function bad(entry: string, why: string): AppError {
  return new AppError('INVALID_PATH', `build context entry ${JSON.stringify(entry)}: ${why}`, { entry })
}

/** The entry's path relative to the root, or an error when it is absolute or has a `..`. */
function cleanName(name: string): string {
  if (name.startsWith('/')) throw bad(name, 'absolute paths are not allowed')
  if (name.split('/').includes('..')) throw bad(name, '".." is not allowed')
  const n = posix.normalize(name).replace(/\/+$/, '')
  return n === '' ? '.' : n
}

/** A link target, resolved from the link's directory, must stay inside the root. */
function checkTarget(entry: string, target: string, fromDir: string): string {
  if (target.startsWith('/')) throw bad(entry, `link to an absolute path ${target}`)
  const resolved = posix.normalize(posix.join(fromDir, target))
  if (resolved === '..' || resolved.startsWith('../')) throw bad(entry, `link ${target} points outside the context`)
  return resolved
}

/**
 * Reads `tar` (uncompressed) to its end, refusing the first bad entry: an absolute or `..` path,
 * a symlink or hardlink leaving the root, a path through a symlink, a duplicate, a device or FIFO,
 * or more than the limits. Never holds more than one entry's header in memory.
 */
export async function validateContextTar(tar: Readable, limits: ContextLimits): Promise<ContextSummary> {
  const maxEntries = limits.maxEntries ?? defaultMaxEntries
  const seen = new Map<string, Header['type']>()
  const symlinks = new Set<string>()
  /** Directories known only as a parent of an entry so far; their own entry may still come. */
  const implied = new Set<string>()
  const files: string[] = []
  let totalBytes = 0
  let entries = 0
  const ex = extract()

  const check = (h: Header): void => {
    const name = cleanName(h.name)
    if (++entries > maxEntries) {
      throw new AppError('PAYLOAD_TOO_LARGE', `build context has more than ${maxEntries} entries`, { maxEntries })
    }
    const type = h.type ?? 'file'
    if (seen.has(name) && !(type === 'directory' && implied.delete(name))) throw bad(h.name, 'appears twice')
    // A path under a symlink would be written through it; refuse rather than resolve.
    const parts = name.split('/')
    for (let i = 1; i < parts.length; i++) {
      const prefix = parts.slice(0, i).join('/')
      if (symlinks.has(prefix)) throw bad(h.name, `goes through the symlink ${prefix}`)
      if (!seen.has(prefix)) {
        seen.set(prefix, 'directory')
        implied.add(prefix)
      } else if (seen.get(prefix) !== 'directory') throw bad(h.name, `${prefix} is not a directory`)
    }
    switch (type) {
      case 'file':
      case 'contiguous-file':
        totalBytes += h.size ?? 0
        if (totalBytes > limits.maxBytes) {
          throw new AppError('PAYLOAD_TOO_LARGE', `build context is larger than ${limits.maxBytes} bytes`, {
            maxBytes: limits.maxBytes,
          })
        }
        files.push(name)
        break
      case 'directory':
        break
      case 'symlink':
        checkTarget(h.name, h.linkname ?? '', posix.dirname(name))
        symlinks.add(name)
        break
      case 'link': {
        // A hardlink names another entry of the archive, from the root; it must be an earlier regular file.
        const target = checkTarget(h.name, h.linkname ?? '', '.')
        const kind = seen.get(target)
        if (kind !== 'file' && kind !== 'contiguous-file')
          throw bad(h.name, `hardlink to ${target}, not an earlier file`)
        files.push(name)
        break
      }
      default:
        throw bad(h.name, `${type} entries are not allowed`)
    }
    seen.set(name, type)
  }

  ex.on('entry', (header, body, next) => {
    // Destroying the extractor errors the open body too; the pipeline below already reports that error.
    body.on('error', () => {})
    try {
      check(header)
    } catch (e) {
      body.resume()
      ex.destroy(e instanceof Error ? e : new Error(String(e)))
      return
    }
    body.on('end', () => next())
    body.resume()
  })
  try {
    await pipeline(tar, ex)
  } catch (e) {
    if (e instanceof AppError) throw e
    throw new AppError(
      'VALIDATION_FAILED',
      `build context is not a valid tar archive: ${e instanceof Error ? e.message : String(e)}`,
    )
  }
  return { files, totalBytes, entries }
}
