// The warm pool sized to demand, on real runsc: a burst of creates grows its template's pool
// toward the burst, and once the burst is forgotten the pool shrinks back to its floor, leaving
// no container behind.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import { until, useTestHost } from './harness.ts'

const HISTORY_S = 20
const host = useTestHost({ options: () => ({ poolSize: 1, poolMax: 3, poolHistorySeconds: HISTORY_S }) })

async function poolSize(template: string): Promise<number> {
  const res = await fetch(`${host().conn.url}/metrics`, { headers: { authorization: `Bearer ${host().conn.apiKey}` } })
  const m = new RegExp(`^forkbox_pool_size\\{template="${template}"\\} (\\d+)`, 'm').exec(await res.text())
  return Number(m?.[1] ?? 0)
}

/** The runsc containers of this host (its own state dir). */
function containers(): number {
  const out = execFileSync('runsc', ['--root', host().stateDir, 'list', '-quiet'], { encoding: 'utf8' })
  return out.split('\n').filter(Boolean).length
}

describe('warm pool sized to demand', () => {
  it('a burst of creates grows the pool toward it (within poolMax); once forgotten it shrinks back to poolSize', async () => {
    const conn = host().conn
    await Sandbox.create({ ...conn, template: 'base' }).then((s) => s.kill())
    await until('the pool at its floor', async () => (await poolSize('base')) === 1, 60_000)
    // a burst of 5: the pool grows to its ceiling of 3, not 5
    const burst = await Promise.all(Array.from({ length: 5 }, () => Sandbox.create({ ...conn, template: 'base' })))
    const sizes: number[] = []
    await until(
      'the pool grown to 3',
      async () => {
        sizes.push(await poolSize('base'))
        return sizes.at(-1) === 3
      },
      90_000,
    )
    for (const sbx of burst) assert.equal((await sbx.exec(['true'])).exitCode, 0)
    await Promise.all(burst.map((s) => s.kill()))
    // stays grown while the burst is remembered...
    assert.equal(await poolSize('base'), 3)
    // ...then back to the floor, the extra sandboxes stopped
    await until('the pool back at its floor', async () => (await poolSize('base')) === 1, 60_000)
    await until('only the pooled container left', () => containers() === 1, 30_000)
    assert.ok(Math.max(...sizes) <= 3, `never past poolMax: ${sizes}`)
  })
})
