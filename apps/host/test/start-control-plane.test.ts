// A replica's control plane (no agent, no runsc): its data dir the owner's only, served on its
// port; a start that fails says why.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { startServerHost } from '../src/server-host.ts'

const dir = mkdtempSync(join(tmpdir(), 'fbx-cp-'))
after(() => rmSync(dir, { recursive: true, force: true }))

describe('starting a control plane', () => {
  it('makes its data dir the owner only, answers on its port, and closes', async () => {
    const dataDir = join(dir, 'up')
    const host = await startServerHost({ port: 0, dataDir, logLevel: 'silent' })
    try {
      assert.equal(statSync(dataDir).mode & 0o777, 0o700)
      assert.ok(host.bootstrapKey, 'a fresh store yields a bootstrap key')
      assert.equal((await fetch(`${host.url}/v1/keys`)).status, 401)
    } finally {
      await host.close()
    }
  })

  it('fails with the listen error when its port is taken', async () => {
    const taken = createServer().listen(0, '127.0.0.1')
    await new Promise((r) => taken.once('listening', r))
    try {
      const port = (taken.address() as { port: number }).port
      await assert.rejects(
        startServerHost({ port, dataDir: join(dir, 'taken'), logLevel: 'silent' }),
        (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE',
      )
    } finally {
      taken.close()
    }
  })
})
