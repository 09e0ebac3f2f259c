// The built-in templates written as Dockerfiles (templates/agent, templates/browser, templates/postgres), built by the
// same builder as users' templates and baked with their services running, used for their purpose.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import { Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()
const PNG_MAGIC = Buffer.from('\x89PNG\r\n\x1a\n', 'latin1')
/** Through the Python SDK: a C file compiled and run in `agent`. */
const AGENT_PY = `
from forkbox import Sandbox
with Sandbox.create(template="agent", ttl_seconds=300) as s:
    print(s.exec('echo "$(id -un) $(pwd)"').stdout, end="")
    s.files.write("/home/user/workspace/main.c", "#include <stdio.h>\\nint main(void) { printf(\\"%d\\\\n\\", 6 * 7); }\\n")
    r = s.exec("gcc -o main main.c && ./main")
    if r.exit_code != 0:
        raise SystemExit(r.stderr)
    print(r.stdout, end="")
`
/** Through the Python SDK: a script in the sandbox drives the running browser with its playwright-core. */
const BROWSER_PY = `
from forkbox import Sandbox
SCRIPT = """
const { chromium } = require('playwright-core')
;(async () => {
  const browser = await chromium.connectOverCDP(process.env.CDP_URL)
  const page = await browser.contexts()[0].newPage()
  await page.setContent('<title>forkbox inside</title><h1 style="font-size:64px">drawn in a sandbox</h1>')
  console.log('title: ' + (await page.title()))
  await page.screenshot({ path: '/tmp/shot.png' })
  await page.close()
  process.exit(0)
})().catch((e) => { console.error(e); process.exit(1) })
"""
with Sandbox.create(template="browser", ttl_seconds=300) as b:
    b.files.write("/home/user/shot.js", SCRIPT)
    r = b.exec(["node", "/home/user/shot.js"])
    if r.exit_code != 0:
        raise SystemExit(r.stderr)
    png = b.files.read_bytes("/tmp/shot.png")
    print(r.stdout, end="")
    print("png:", png[:8] == b"\\x89PNG\\r\\n\\x1a\\n", len(png), "bytes")
`

describe('built-in templates from Dockerfiles', () => {
  it('agent: a C program compiles and runs, an npm script runs, as user in ~/workspace', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: 'agent' })
    const whereAmI = await sbx.exec(
      'echo "$(id -un) $(pwd)"; rg --version | head -1; jq --version; sqlite3 --version | cut -c1-4',
    )
    assert.equal(whereAmI.exitCode, 0, whereAmI.stderr)
    assert.match(whereAmI.stdout, /^user \/home\/user\/workspace\nripgrep \d+.*\njq-1\.\d.*\n3\.\d/)
    await sbx.files.write(
      '/home/user/workspace/hello.c',
      '#include <stdio.h>\nint main(void) { printf("%d\\n", 6 * 7); return 0; }\n',
    )
    const cc = await sbx.exec('gcc -O2 -o hello hello.c && ./hello')
    assert.equal(cc.stdout, '42\n', cc.stderr)
    const pkg = {
      name: 'demo',
      version: '1.0.0',
      scripts: { greet: 'node -e "console.log(process.version.startsWith(\'v\'))"' },
    }
    await sbx.files.write('/home/user/workspace/package.json', JSON.stringify(pkg))
    const npm = await sbx.exec('npm run --silent greet')
    assert.equal(npm.stdout, 'true\n', npm.stderr)
    const venv = await sbx.exec('python3 -m venv .venv && .venv/bin/python -c "import sys; print(sys.prefix)"')
    assert.equal(venv.stdout, '/home/user/workspace/.venv\n', venv.stderr)
    // the same through the Python SDK
    const py = await promisify(execFile)(
      execFileSync('bash', ['scripts/python-venv.sh']).toString().trim(),
      ['-c', AGENT_PY],
      {
        env: {
          ...process.env,
          FORKBOX_URL: host().conn.url,
          FORKBOX_API_KEY: host().conn.apiKey,
          PYTHONPATH: 'python',
        },
      },
    )
    assert.equal(py.stdout, 'user /home/user/workspace\n42\n')
  })

  it('postgres: a create is a live database, ready for a query with no start-up wait', async () => {
    const started = performance.now()
    await using sbx = await Sandbox.create({ ...host().conn, template: 'postgres' })
    const q = await sbx.exec([
      'psql',
      '-v',
      'ON_ERROR_STOP=1',
      '-qAt',
      '-c',
      'create table t (x int); insert into t values (20), (22); select sum(x) from t;',
    ])
    const firstQueryMs = performance.now() - started
    assert.equal(q.exitCode, 0, q.stderr)
    assert.equal(q.stdout, '42\n')
    console.log(`postgres: create → first query ${firstQueryMs.toFixed(0)} ms`)
    // each sandbox its own database: the table is not in another one
    await using other = await Sandbox.create({ ...host().conn, template: 'postgres' })
    // its image's ENV also when it came from the warm pool (a claim sets the sandbox's env anew)
    assert.equal((await other.exec('echo "$PGHOST $PGUSER"')).stdout, '/run/postgresql postgres\n')
    const missing = await other.exec(['psql', '-qAt', '-c', 'select count(*) from t'])
    assert.notEqual(missing.exitCode, 0)
    assert.match(missing.stderr, /relation "t" does not exist/)
  })

  it('postgres: a disk-only hibernate keeps the database on disk; it wakes with the server started afresh, nothing else running', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, template: 'postgres' })
    const psql = (sql: string) => sbx.exec(['psql', '-v', 'ON_ERROR_STOP=1', '-qAt', '-c', sql])
    assert.equal((await psql('create table kept (x int); insert into kept values (41), (1);')).exitCode, 0)
    const postmaster = async () => (await sbx.exec('head -1 /var/lib/postgresql/data/postmaster.pid')).stdout.trim()
    const before = await postmaster()
    await sbx.exec('sleep 3600', { background: true })
    await sbx.exec('echo root-made > /usr/local/share/made.txt', { user: 'root' })
    const info = await sbx.hibernate({ keepMemory: false })
    assert.equal(info.state, 'hibernated')
    // a call wakes it: the rows are there, served by a postmaster started since
    const q = await psql('select sum(x) from kept')
    assert.equal(q.stdout, '42\n', q.stderr)
    assert.notEqual(await postmaster(), before)
    assert.equal((await sbx.exec('pgrep -fx "sleep 3600"')).exitCode, 1, 'the background sleep ended')
    assert.equal(await sbx.files.read('/usr/local/share/made.txt'), 'root-made\n')
  })

  it('browser: a page served inside is driven over CDP from the host and screenshot (the example), and from inside through the Python SDK', async () => {
    const env = { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey }
    const out = join(mkdtempSync(join(tmpdir(), 'forkbox-browser-')), 'page.png')
    try {
      const ts = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'examples/browser-screenshot.ts', out],
        {
          env,
          timeout: 300_000,
        },
      )
      assert.match(ts.stdout, /^clicked: clicked in HeadlessChrome\/\d+/m)
      const png = readFileSync(out)
      assert.ok(png.subarray(0, 8).equals(PNG_MAGIC), 'a PNG')
      // 780x493 of mostly white: a blank page compresses to far less
      assert.ok(png.length > 3000, `${png.length} bytes`)
      console.log(ts.stdout.trim())
    } finally {
      rmSync(dirname(out), { recursive: true, force: true })
    }
    // inside: the template's own playwright-core on CDP_URL, driven through the Python SDK
    const py = await promisify(execFile)(
      execFileSync('bash', ['scripts/python-venv.sh']).toString().trim(),
      ['-c', BROWSER_PY],
      { env: { ...env, PYTHONPATH: 'python' }, timeout: 120_000 },
    )
    assert.match(py.stdout, /^title: forkbox inside\npng: True \d{4,} bytes\n$/)
  })

  it('the examples: custom-template.ts (Dockerfile → build → create → exec) and python/postgres.py', async () => {
    const env = { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey }
    const name = `example-${process.pid}`
    const ts = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'examples/custom-template.ts', name], {
      env,
      timeout: 300_000,
    })
    assert.match(ts.stdout, new RegExp(`built ${name}@1`))
    assert.match(ts.stdout, /built with forkbox in \/srv\/site/)
    assert.match(ts.stdout, /GET \/ → 200: <h1>hello from a forkbox template<\/h1>/)
    await fetch(`${host().conn.url}/v1/templates/${name}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${host().conn.apiKey}` },
    })
    const py = await promisify(execFile)(
      execFileSync('bash', ['scripts/python-venv.sh']).toString().trim(),
      ['examples/python/postgres.py'],
      { env: { ...env, PYTHONPATH: 'python' }, timeout: 120_000 },
    )
    assert.match(py.stdout, /^north 255\nsouth 90\ncreate → query answered in \d+ ms\n$/)
  })
})
