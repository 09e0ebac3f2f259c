// Files: stat, read and write round trips as the default user, as `user` and as `root` (each file
// op runs with its user's credentials on a guest worker thread), the same with the user changing
// on every call (a credential switch each time), a 50 MB read and write, stat with file metadata, and
// how soon a watch reports a write. Not a test.
//   node --import tsx bench/files.ts [--iterations N]
import { Sandbox } from '@forkbox/sdk'
import { benchHost, measure, N, printSummary, report } from './lib.ts'

const host = await benchHost('files', 0)
try {
  const sbx = await Sandbox.create({ ...host.conn })
  const small = 'x'.repeat(1024)
  await sbx.files.write('/tmp/small.txt', small)
  for (const user of [undefined, 'user', 'root'] as const) {
    const as = user ? `user: ${user}` : 'default user'
    report(`stat (${as})`, await measure(N, () => sbx.files.stat('/tmp/small.txt', { user })))
    report(`read 1 KiB (${as})`, await measure(N, () => sbx.files.read('/tmp/small.txt', { user })))
    report(
      `write 1 KiB (${as})`,
      await measure(N, () => sbx.files.write(`/tmp/w-${user ?? 'default'}.txt`, small, { user })),
    )
  }
  let flip = false
  report(
    'stat, user and root alternating (a switch per call)',
    await measure(N, () => {
      flip = !flip
      return sbx.files.stat('/tmp/small.txt', { user: flip ? 'user' : 'root' })
    }),
  )
  report('list /etc', await measure(N, () => sbx.files.list('/etc')))
  // metadata: stat reads a file's extended attributes; the plain stat above is the baseline
  const meta = { a: '1', b: '2', c: '3', d: '4' }
  await sbx.files.write('/tmp/meta.txt', small, { metadata: meta })
  report('stat of a file with 4 metadata entries', await measure(N, () => sbx.files.stat('/tmp/meta.txt')))
  report('list /etc with metadata', await measure(N, () => sbx.files.list('/etc', { metadata: true })))
  // watch: from the write's answer to its event at the client (SSE from the guest's inotify)
  await sbx.files.makeDir('/tmp/watched')
  const waiting = new Map<string, () => void>()
  const handle = await sbx.files.watch('/tmp/watched', (c) => {
    if (c.type === 'write') waiting.get(c.name)?.()
  })
  let i = 0
  report(
    'watch: write through the API → its event',
    await measure(N, async () => {
      const name = `f${i++}`
      const seen = new Promise<void>((r) => waiting.set(name, r))
      await sbx.files.write(`/tmp/watched/${name}`, 'x')
      await seen
    }),
  )
  await handle.stop()
  const big = new Uint8Array(50 << 20)
  const runs = Math.min(N, 5)
  report('write 50 MB', await measure(runs, () => sbx.files.write('/tmp/big.bin', big), 1))
  report('read 50 MB', await measure(runs, () => sbx.files.read('/tmp/big.bin', { format: 'bytes' }), 1))
  await sbx.kill()
  printSummary()
} finally {
  await host.close()
}
