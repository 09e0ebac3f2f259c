// The Python SDK's own unit tests (python/tests: retries, event streams), run from here so that
// `npm test` runs them; the SDK behaviours both SDKs share are in tests/conformance.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { it } from 'node:test'

const root = new URL('../../../', import.meta.url).pathname

it('python/tests pass (unittest)', () => {
  const python = execFileSync('bash', [`${root}scripts/python-venv.sh`])
    .toString()
    .trim()
  const r = spawnSync(python, ['-m', 'unittest', 'discover', '-s', 'python/tests'], { cwd: root, encoding: 'utf8' })
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`)
  assert.match(r.stderr, /^Ran \d+ tests?/m)
})
