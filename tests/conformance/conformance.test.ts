// One list of behaviours (behaviours.json), run through both SDKs against a real server on real
// runsc: every behaviour must be implemented and pass in each.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import { useTestHost } from '../e2e/harness.ts'
import { type Results, runTsBehaviours } from './ts-sdk.ts'

const host = useTestHost()
// Debian's python3 and httpx, plus httpx-sse (the venv is made once, offline)
const python = execFileSync('bash', [new URL('../../scripts/python-venv.sh', import.meta.url).pathname])
  .toString()
  .trim()
const behaviours = Object.keys(JSON.parse(readFileSync(new URL('./behaviours.json', import.meta.url), 'utf8')))

function check(sdk: string, results: Results): void {
  for (const name of behaviours) {
    const r = results[name]
    assert.ok(r, `${sdk} SDK does not implement "${name}"`)
    assert.ok(r.ok, `${sdk} SDK fails "${name}":\n${r.error}`)
  }
}

describe('SDK conformance', () => {
  it('the TypeScript SDK', async () => {
    check('TypeScript', await runTsBehaviours(host().conn))
  })

  it('the Python SDK (sync)', async () => {
    const { stdout } = await promisify(execFile)(python, [new URL('./python_sdk.py', import.meta.url).pathname], {
      env: { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey },
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    })
    check('Python', JSON.parse(stdout.trim().split('\n').at(-1) as string) as Results)
  })

  it('the Python SDK (asyncio mirror)', async () => {
    const { stdout } = await promisify(execFile)(python, [new URL('./python_async.py', import.meta.url).pathname], {
      env: { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey },
      timeout: 300_000,
    })
    assert.deepEqual(JSON.parse(stdout.trim()), { ok: true })
  })
})
