// validateContextTar on crafted tarballs: good ones pass, each escape or excess is refused by name.
import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { pack } from 'tar-stream'
import { validateContextTar } from '../src/templates/context-tar.ts'

type Entry = {
  name: string
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device'
  linkname?: string
  body?: string
}

function tarball(entries: Entry[]): Readable {
  const p = pack()
  for (const e of entries) {
    const type = e.type ?? 'file'
    const header = { name: e.name, type, linkname: e.linkname }
    if (type === 'file') p.entry(header, e.body ?? '')
    else p.entry(header)
  }
  p.finalize()
  return Readable.from(p)
}

const limits = { maxBytes: 1024 }

async function refused(entries: Entry[], pattern: RegExp, code = 'INVALID_PATH'): Promise<void> {
  await assert.rejects(validateContextTar(tarball(entries), limits), (e) => {
    assert.ok(e instanceof AppError, String(e))
    assert.equal(e.code, code)
    assert.match(e.message, pattern)
    return true
  })
}

describe('validateContextTar', () => {
  it('accepts a normal context and lists its files', async () => {
    const summary = await validateContextTar(
      tarball([
        { name: 'Dockerfile', body: 'FROM a\n' },
        { name: 'src/', type: 'directory' },
        { name: 'src/main.py', body: 'print(1)\n' },
        { name: 'src/link', type: 'symlink', linkname: 'main.py' },
        { name: 'up', type: 'symlink', linkname: 'src/../Dockerfile' },
        { name: 'hard', type: 'link', linkname: 'src/main.py' },
        { name: './dot/x', body: 'x' },
        { name: 'dot/', type: 'directory' },
      ]),
      limits,
    )
    assert.deepEqual(summary.files, ['Dockerfile', 'src/main.py', 'hard', 'dot/x'])
    assert.equal(summary.totalBytes, 7 + 9 + 1)
    assert.equal(summary.entries, 8)
  })

  it('refuses ".." and absolute paths', async () => {
    await refused([{ name: '../evil' }], /"\.\." is not allowed/)
    await refused([{ name: 'a/../../evil' }], /"\.\." is not allowed/)
    await refused([{ name: '/etc/passwd' }], /absolute/)
  })

  it('refuses symlinks pointing outside and paths through a symlink', async () => {
    await refused([{ name: 'l', type: 'symlink', linkname: '/etc' }], /absolute/)
    await refused([{ name: 'a/l', type: 'symlink', linkname: '../../etc' }], /outside/)
    await refused(
      [
        { name: 'l', type: 'symlink', linkname: '.' },
        { name: 'l/x', body: 'x' },
      ],
      /through the symlink l/,
    )
  })

  it('refuses hardlinks outside or to what is not an earlier file', async () => {
    await refused([{ name: 'h', type: 'link', linkname: '../x' }], /outside/)
    await refused([{ name: 'h', type: 'link', linkname: 'later' }, { name: 'later' }], /not an earlier file/)
  })

  it('refuses devices, FIFOs and duplicates', async () => {
    await refused([{ name: 'f', type: 'fifo' }], /fifo entries/)
    await refused([{ name: 'd', type: 'character-device' }], /character-device/)
    await refused([{ name: 'x' }, { name: 'x' }], /twice/)
  })

  it('refuses a context over the size cap from the header, without reading the body', async () => {
    await refused([{ name: 'big', body: 'x'.repeat(2000) }], /larger than 1024/, 'PAYLOAD_TOO_LARGE')
    // A 2 GB entry whose body never comes: refused as soon as its header is read.
    const p = pack()
    // The writer side of this test's own packer errors when the check stops reading; that is expected.
    p.entry({ name: 'huge', size: 2 * 1024 ** 3 }).on('error', () => {})
    await assert.rejects(validateContextTar(Readable.from(p), limits), /larger than/)
  })

  it('refuses too many entries', async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ name: `f${i}` }))
    await assert.rejects(validateContextTar(tarball(many), { maxBytes: 1024, maxEntries: 4 }), /more than 4 entries/)
  })

  it('refuses what is not a tarball', async () => {
    await assert.rejects(validateContextTar(Readable.from([Buffer.alloc(1024, 7)]), limits), (e) => {
      assert.ok(e instanceof AppError)
      assert.equal(e.code, 'VALIDATION_FAILED')
      return true
    })
  })
})
