// A built template's rootfs from agent to agent over HTTP (real GNU tar both ways): owners, modes,
// times, symlinks and hardlinks arrive as they were; a cut pull resumes; the rootfs signature
// reads no snapshot; the bytes are checked against the control plane's record (not the sender's
// hash) before anything is unpacked; an archive with an entry that leads out is refused whole.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import {
  chmodSync,
  existsSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { pack } from 'tar-stream'
import { fetchImage, imageSignature, serveImage } from '../src/remote/images.ts'
import { type ExpectedDigest, expectedDigest, exportImage } from '../src/sandboxes/image-transfer.ts'
import { exportRootfs, importRootfs, rootfsDigest } from '../src/templates/rootfs-transfer.ts'
import { cutFirstResponse } from './cut-response.ts'

const CREDENTIAL = 'host-credential-for-tests'
const NAME = 'built-0123456789abcdef'
let dir: string
let server: Server
let base: string
const requests: string[] = []

/** A small rootfs with what a real one has: owners, setuid, sticky dirs, absolute and relative symlinks, hardlinks. */
function makeTree(root: string): void {
  mkdirSync(join(root, 'usr/bin'), { recursive: true })
  mkdirSync(join(root, 'home/user'), { recursive: true })
  mkdirSync(join(root, 'tmp'))
  chmodSync(join(root, 'tmp'), 0o1777)
  writeFileSync(join(root, 'usr/bin/python3'), Buffer.alloc(2 * 1024 * 1024 + 5, 9))
  chmodSync(join(root, 'usr/bin/python3'), 0o755)
  writeFileSync(join(root, 'usr/bin/sudo'), 'sudo')
  chmodSync(join(root, 'usr/bin/sudo'), 0o4755)
  symlinkSync('/usr/bin/python3', join(root, 'usr/bin/python'))
  symlinkSync('python3', join(root, 'usr/bin/python3.11'))
  linkSync(join(root, 'usr/bin/python3'), join(root, 'usr/bin/python3-hard'))
  writeFileSync(join(root, 'home/user/.profile'), 'export A=1\n')
  lchownSync(join(root, 'home/user/.profile'), 1000, 1000)
  lchownSync(join(root, 'home/user'), 1000, 1000)
  writeFileSync(join(root, 'home/user/empty'), '')
  utimesSync(join(root, 'usr/bin/sudo'), new Date('2024-01-02T03:04:05Z'), new Date('2024-01-02T03:04:05Z'))
}

/** Every entry under `root`: its type, owner, mode, mtime (in seconds, as tar keeps it), and its content's hash or its link target. */
function describeTree(root: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name
      const p = join(root, r)
      const st = lstatSync(p)
      const what = st.isSymbolicLink()
        ? `link:${readlinkSync(p)}`
        : st.isDirectory()
          ? 'dir'
          : `file:${createHash('sha256').update(readFileSync(p)).digest('hex')}`
      out[r] =
        `${what} ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)} ${st.isSymbolicLink() ? '' : Math.floor(st.mtimeMs / 1000)}`
      if (st.isDirectory()) walk(r)
    }
  }
  walk('')
  return out
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-rootfs-'))
  makeTree(join(dir, NAME))
  mkdirSync(join(dir, 'scratch'))
  mkdirSync(join(dir, 'snap-1'))
  writeFileSync(join(dir, 'snap-1', 'pages.img'), 'pages')
  server = createServer((req, res) => {
    cutFirstResponse(req, res)
    requests.push(req.url ?? '')
    // `drop=1`: the first connection is reset before any answer (a peer restarting, a flaky link)
    if (req.url?.includes('drop=1') && requests.filter((u) => u.includes('drop=1')).length === 1) {
      req.socket.destroy()
      return
    }
    const served = serveImage(req, res, {
      credential: () => CREDENTIAL,
      exportImage: async (id, skip) => exportImage(join(dir, id), skip),
      exportRootfs: (name, skip) => exportRootfs(join(dir, name), skip),
    })
    if (!served) res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})

after(async () => {
  await new Promise((r) => server.close(r))
  rmSync(dir, { recursive: true, force: true })
})

function rootfsUrl(name: string, kind: 'image' | 'rootfs' = 'rootfs'): string {
  const expires = Date.now() + 60_000
  return `${base}/v1/agent/rootfs/${name}?expires=${expires}&sig=${imageSignature(CREDENTIAL, name, expires, kind)}`
}

/** Pulls `url` into `into`, checked against `recorded` (the control plane's record; null: the sender's hash). */
async function pull(url: string, into: string, recorded: string | null = null): Promise<number> {
  const { body, sha256 } = await fetchImage(url)
  return importRootfs(into, join(dir, 'scratch', `pull-${Math.random()}`), body, expectedDigest(recorded, sha256))
}

/** A tar made with tar-stream from `entries`, and a record that matches its bytes. */
async function archive(
  entries: { header: Parameters<ReturnType<typeof pack>['entry']>[0]; body?: string }[],
): Promise<{ body: () => AsyncIterable<Uint8Array>; expected: ExpectedDigest }> {
  const tar = pack()
  for (const e of entries) tar.entry(e.header, e.body ?? '')
  tar.finalize()
  const chunks: Buffer[] = []
  for await (const c of tar as AsyncIterable<Buffer>) chunks.push(c)
  const bytes = Buffer.concat(chunks)
  const sha = createHash('sha256').update(bytes).digest('hex')
  return {
    body: async function* () {
      yield bytes
    },
    expected: expectedDigest(sha, Promise.resolve(sha)),
  }
}

describe('template images between agents', () => {
  it('a signed pull copies the rootfs whole: owners, modes, times, symlinks and hardlinks as they were', async () => {
    const into = join(dir, 'copy-1')
    // the record: the hash the builder reported
    assert.ok((await pull(rootfsUrl(NAME), into, await rootfsDigest(join(dir, NAME)))) > 2 * 1024 * 1024)
    assert.deepEqual(describeTree(into), describeTree(join(dir, NAME)))
    assert.equal(lstatSync(join(into, 'usr/bin/python3')).ino, lstatSync(join(into, 'usr/bin/python3-hard')).ino)
    assert.equal((lstatSync(into).mode & 0o7777).toString(8), (lstatSync(join(dir, NAME)).mode & 0o7777).toString(8))
    // nothing of the pull is left beside it
    assert.deepEqual(readdirSync(join(dir, 'scratch')), [])
  })

  it('a pull cut midway resumes from the byte it reached; the copy is whole', async () => {
    requests.length = 0
    const into = join(dir, 'copy-2')
    await pull(`${rootfsUrl(NAME)}&cut=${1536 * 1024}`, into)
    assert.deepEqual(describeTree(into), describeTree(join(dir, NAME)))
    assert.equal(requests.length, 2, JSON.stringify(requests))
    assert.ok(Number(new URL(requests[1] ?? '', 'http://x').searchParams.get('offset')) > 0)
  })

  it('a connection reset before the first answer is tried again, not failed', async () => {
    requests.length = 0
    const into = join(dir, 'copy-3')
    await pull(`${rootfsUrl(NAME)}&drop=1`, into)
    assert.deepEqual(describeTree(into), describeTree(join(dir, NAME)))
    assert.equal(requests.length, 2, JSON.stringify(requests))
  })

  it("a snapshot's signature reads no rootfs, a rootfs's no snapshot; only built template names are served", async () => {
    await assert.rejects(pull(rootfsUrl(NAME, 'image'), join(dir, 'no-1')), { code: 'HOST_UNREACHABLE' })
    const expires = Date.now() + 60_000
    const asSnapshot = `${base}/v1/agent/images/snap-1?expires=${expires}&sig=${imageSignature(CREDENTIAL, 'snap-1', expires, 'rootfs')}`
    await assert.rejects(fetchImage(asSnapshot), { code: 'HOST_UNREACHABLE' })
    // a snapshot's dir asked for as a rootfs, and a rootfs that is not there: not found, nothing sent
    await assert.rejects(pull(rootfsUrl('snap-1'), join(dir, 'no-2')), { code: 'SNAPSHOT_NOT_FOUND' })
    await assert.rejects(pull(rootfsUrl('built-ffffffffffffffff'), join(dir, 'no-3')), { code: 'SNAPSHOT_NOT_FOUND' })
    for (const d of ['no-1', 'no-2', 'no-3']) assert.equal(existsSync(join(dir, d)), false)
  })

  it('a copy exports the very bytes of the original: the record holds for every later hop', async () => {
    const copy = join(dir, 'hop', NAME)
    mkdirSync(join(dir, 'hop'))
    await pull(rootfsUrl(NAME), copy, await rootfsDigest(join(dir, NAME)))
    assert.equal(await rootfsDigest(copy), await rootfsDigest(join(dir, NAME)))
  })

  it("a sender whose bytes differ from the control plane's record is refused, though its own hash matches them; nothing is unpacked", async () => {
    const record = await rootfsDigest(join(dir, NAME))
    // the holder's tree changed after its build was recorded (a compromised agent, a swapped disk)
    const tampered = 'built-00000000000000aa'
    makeTree(join(dir, tampered))
    writeFileSync(join(dir, tampered, 'usr/bin/sudo'), 'evil')
    chmodSync(join(dir, tampered, 'usr/bin/sudo'), 0o4755)
    const into = join(dir, 'tampered-copy')
    // the sender's trailer is the true hash of what it sends: only the record tells
    await assert.rejects(pull(rootfsUrl(tampered), into, record), (err: Error) => {
      assert.match(
        err.message,
        /template image transfer refused: its bytes hash to sha256 [0-9a-f]{64}, but the control plane recorded/,
      )
      assert.ok(err.message.includes(record))
      return true
    })
    assert.equal(existsSync(into), false)
    assert.deepEqual(readdirSync(join(dir, 'scratch')), [])
    // the same pull checked against the sender alone would have taken it: the record is what refuses
    await pull(rootfsUrl(tampered), join(dir, 'tampered-unchecked'))
    assert.equal(readFileSync(join(dir, 'tampered-unchecked', 'usr/bin/sudo'), 'utf8'), 'evil')
  })

  it('a malformed record in a pull request is refused before anything is fetched', async () => {
    const { LocalAgent, defaultAgentConfig } = await import('../src/index.ts')
    const agent = new LocalAgent(defaultAgentConfig({ dataDir: join(dir, 'agent-data') }))
    requests.length = 0
    await assert.rejects(agent.pullRootfs(NAME, { url: rootfsUrl(NAME), sha256: 'not-a-hash' }), {
      code: 'VALIDATION_FAILED',
    })
    assert.deepEqual(requests, [])
  })

  it('a transfer whose bytes do not match their hash leaves nothing', async () => {
    const image = await exportRootfs(join(dir, NAME))
    const into = join(dir, 'corrupt')
    await assert.rejects(
      importRootfs(
        into,
        join(dir, 'scratch', 'corrupt'),
        image.stream as unknown as AsyncIterable<Uint8Array>,
        expectedDigest(null, Promise.resolve('0'.repeat(64))),
      ),
      /refused: its bytes hash to sha256 [0-9a-f]{64}, but its sender says 0{64}/,
    )
    assert.equal(existsSync(into), false)
    assert.deepEqual(readdirSync(join(dir, 'scratch')), [])
  })
})

describe('template image entries, checked before anything is unpacked as root', () => {
  const outside = () => join(dir, 'outside')
  const root = { header: { name: './', type: 'directory' as const, mode: 0o755 } }
  const hostile: [string, Parameters<typeof archive>[0]][] = [
    ['a `..` name', [root, { header: { name: './../escaped', mode: 0o644 }, body: 'x' }]],
    ['an absolute name', [root, { header: { name: '/abs-escaped', mode: 0o644 }, body: 'x' }]],
    [
      'a file through an absolute symlink',
      [
        root,
        { header: { name: './link', type: 'symlink', linkname: '/tmp' } },
        { header: { name: './link/through', mode: 0o644 }, body: 'x' },
      ],
    ],
    [
      'a file through a relative symlink',
      [
        root,
        { header: { name: './rel', type: 'symlink', linkname: '../outside' } },
        { header: { name: './rel/through', mode: 0o644 }, body: 'x' },
      ],
    ],
    [
      'a hardlink out of the image',
      [root, { header: { name: './shadow', type: 'link', linkname: '../../../../etc/shadow' } }],
    ],
    ['a hardlink to an absolute path', [root, { header: { name: './shadow', type: 'link', linkname: '/etc/shadow' } }]],
    [
      'a hardlink to nothing the image made before it',
      [root, { header: { name: './later', type: 'link', linkname: './not-yet' } }],
    ],
    [
      'a device node',
      [root, { header: { name: './sda', type: 'block-device', devmajor: 8, devminor: 0, mode: 0o666 } }],
    ],
    [
      'a character device other than a whiteout or a pseudo device (/dev/mem)',
      [root, { header: { name: './mem', type: 'character-device', devmajor: 1, devminor: 1, mode: 0o666 } }],
    ],
    ['a fifo', [root, { header: { name: './pipe', type: 'fifo', mode: 0o666 } }]],
    [
      'a name twice (a symlink replaced by a dir)',
      [
        root,
        { header: { name: './d', type: 'symlink', linkname: '/etc' } },
        { header: { name: './d', type: 'directory', mode: 0o755 } },
        { header: { name: './d/passwd', mode: 0o644 }, body: 'x' },
      ],
    ],
  ]
  for (const [what, entries] of hostile)
    it(`refuses ${what}, though the record matches; nothing is unpacked`, async () => {
      if (!existsSync(outside())) mkdirSync(outside())
      const { body, expected } = await archive([
        ...entries,
        { header: { name: './innocent', mode: 0o644 }, body: 'before the bad entry was seen' },
      ])
      const into = join(dir, 'hostile')
      await assert.rejects(importRootfs(into, join(dir, 'scratch', 'hostile'), body(), expected), {
        code: 'VALIDATION_FAILED',
        message: /template image refused: entry/,
      })
      assert.equal(existsSync(into), false)
      assert.deepEqual(readdirSync(outside()), [])
      assert.equal(existsSync(join(dir, 'escaped')), false)
      assert.equal(existsSync('/abs-escaped'), false)
      assert.deepEqual(readdirSync(join(dir, 'scratch')), [])
    })

  it("takes what a rootfs holds: dirs, files, absolute and relative symlinks, hardlinks, an overlay whiteout, debootstrap's /dev", async () => {
    const { body, expected } = await archive([
      root,
      { header: { name: './etc/', type: 'directory', mode: 0o755 } },
      { header: { name: './etc/hosts', mode: 0o644 }, body: '127.0.0.1 localhost\n' },
      { header: { name: './etc/hosts-hard', type: 'link', linkname: './etc/hosts' } },
      { header: { name: './etc/localtime', type: 'symlink', linkname: '/usr/share/zoneinfo/UTC' } },
      { header: { name: './etc/up', type: 'symlink', linkname: '../../..' } },
      { header: { name: './gone', type: 'character-device', devmajor: 0, devminor: 0, mode: 0 } },
      { header: { name: './dev/', type: 'directory', mode: 0o755 } },
      { header: { name: './dev/null', type: 'character-device', devmajor: 1, devminor: 3, mode: 0o666 } },
      { header: { name: './dev/ptmx', type: 'character-device', devmajor: 5, devminor: 2, mode: 0o666 } },
    ])
    const into = join(dir, 'plain')
    await importRootfs(into, join(dir, 'scratch', 'plain'), body(), expected)
    assert.equal(readFileSync(join(into, 'etc/hosts'), 'utf8'), '127.0.0.1 localhost\n')
    assert.equal(lstatSync(join(into, 'etc/hosts')).ino, lstatSync(join(into, 'etc/hosts-hard')).ino)
    assert.equal(readlinkSync(join(into, 'etc/localtime')), '/usr/share/zoneinfo/UTC')
    assert.equal(readlinkSync(join(into, 'etc/up')), '../../..')
    assert.ok(lstatSync(join(into, 'gone')).isCharacterDevice())
    assert.equal(lstatSync(join(into, 'dev/null')).rdev, lstatSync('/dev/null').rdev)
    assert.deepEqual(readdirSync(join(dir, 'scratch')), [])
  })
})
