// The Python SDK's own unit tests (python/tests: retries, event streams, template builds), run from
// here so that `npm test` runs them: the template tests reach this file's server over a loopback
// port, directly and through a proxy that cuts build log streams. The SDK behaviours both SDKs
// share on real sandboxes are in tests/conformance.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { it } from 'node:test'
import { promisify } from 'node:util'
import { useTestServer } from './server.ts'
import { cuttingProxy, serveOverTcp } from './tcp.ts'

const root = new URL('../../../', import.meta.url).pathname
const server = useTestServer()

it('python/tests pass (unittest)', async () => {
  const python = execFileSync('bash', [`${root}scripts/python-venv.sh`])
    .toString()
    .trim()
  const s = server()
  s.agent.stepLines = 40
  const tcp = await serveOverTcp(s.cp)
  const proxy = await cuttingProxy(tcp.url, 15)
  try {
    // the server runs in this process: the child must not block its event loop (no spawnSync)
    const r = await promisify(execFile)(python, ['-m', 'unittest', 'discover', '-s', 'python/tests'], {
      cwd: root,
      env: {
        ...process.env,
        FORKBOX_TEST_URL: tcp.url,
        FORKBOX_TEST_API_KEY: s.apiKey,
        FORKBOX_TEST_CUT_URL: proxy.url,
        PYTHONDONTWRITEBYTECODE: '1',
      },
    }).catch((err: { stdout?: string; stderr?: string }) => assert.fail(`${err.stdout}${err.stderr}`))
    assert.match(r.stderr, /^Ran \d+ tests?/m)
    assert.doesNotMatch(r.stderr, /skipped/)
    assert.equal(proxy.cuts(), 2)
  } finally {
    await proxy.close()
    await tcp.close()
  }
})
