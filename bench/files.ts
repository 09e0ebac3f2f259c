// Files: stat, read and write round trips as the default user, as `user` and as `root` (each file
// op runs with its user's credentials on a guest worker thread), the same with the user changing
// on every call (a credential switch each time), and a 50 MB read and write. Not a test.
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
  const big = new Uint8Array(50 << 20)
  const runs = Math.min(N, 5)
  report('write 50 MB', await measure(runs, () => sbx.files.write('/tmp/big.bin', big), 1))
  report('read 50 MB', await measure(runs, () => sbx.files.read('/tmp/big.bin', { format: 'bytes' }), 1))
  await sbx.kill()
  printSummary()
} finally {
  await host.close()
}
