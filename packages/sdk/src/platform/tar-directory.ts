// A directory as a tar, read as it is sent (Node only: the platform's `tarDirectory`).
// `.dockerignore` is applied by the builder, never here.
import { createReadStream } from 'node:fs'
import { lstat, readdir, readlink } from 'node:fs/promises'
import { join } from 'node:path'
import { pack } from 'tar-stream'

/** The tree under `dir`, parents before children, in name order: its directories, files and symlinks. */
async function* walk(dir: string, prefix = ''): AsyncGenerator<{ path: string; name: string }> {
  const names = (await readdir(dir)).sort()
  for (const name of names) {
    const path = join(dir, name)
    const rel = prefix ? `${prefix}/${name}` : name
    yield { path, name: rel }
    if ((await lstat(path)).isDirectory()) yield* walk(path, rel)
  }
}

type Pack = ReturnType<typeof pack>
type Header = Parameters<Pack['entry']>[0]

/** Writes one entry (its body, for a file) and resolves once the archive has taken it whole. */
function addEntry(archive: Pack, header: Header, body?: AsyncIterable<Uint8Array>): Promise<void> {
  return new Promise((resolve, reject) => {
    const sink = archive.entry(header, (err) => (err ? reject(err) : resolve()))
    if (!body) return
    const write = async () => {
      for await (const chunk of body) {
        if (!sink.write(chunk)) await new Promise<void>((r) => sink.once('drain', () => r()))
      }
      sink.end(undefined)
    }
    write().catch((err: unknown) => sink.destroy(err instanceof Error ? err : new Error(String(err))))
  })
}

/** A tar of `dir`'s contents (names relative to it, owned by root); sockets and devices are left out. */
export async function* tarDirectory(dir: string): AsyncGenerator<Uint8Array> {
  if (!(await lstat(dir)).isDirectory()) throw new TypeError(`the build context ${dir} is not a directory`)
  const archive = pack()
  const writing = (async () => {
    for await (const { path, name } of walk(dir)) {
      const st = await lstat(path)
      const header = { name, mode: st.mode & 0o7777, mtime: st.mtime, uid: 0, gid: 0 }
      if (st.isDirectory()) await addEntry(archive, { ...header, name: `${name}/`, type: 'directory' })
      else if (st.isSymbolicLink())
        await addEntry(archive, { ...header, type: 'symlink', linkname: await readlink(path) })
      else if (st.isFile()) await addEntry(archive, { ...header, type: 'file', size: st.size }, createReadStream(path))
    }
    archive.finalize()
  })()
  // a failure (a file gone, unreadable) ends the archive with it, so the upload fails rather than sends a cut tar
  writing.catch((err: unknown) => archive.destroy(err instanceof Error ? err : new Error(String(err))))
  for await (const chunk of archive) yield chunk as Uint8Array
  await writing
}
